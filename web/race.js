// The race model: a copy of one race, taken from a `race` message and kept exact by each `race_diff`
// in `v` order (protocol/README.md section 15), and what a player reads of it (the lobby's seats, the
// standings as progress bars, the places, a spectator's late boards, the rematch on offer). No DOM:
// node's test runner checks it (tests/web/race.test.mjs).

/** An invitation code: 8 of A-Z 2-9 without I, L and O (protocol README, `race_join`). */
export const RACE_CODE = /^[A-HJKMNP-Z2-9]{8}$/;

/**
 * The invitation in a page's path: null when the path is no /r/ link, else {code} (upper-cased, as
 * people type codes) or {error} saying plainly what is wrong with it.
 */
export function raceLink(pathname) {
  const match = /^\/r\/([^/]*)\/?$/.exec(pathname);
  if (!match && !pathname.startsWith("/r/")) return null;
  let code;
  try { code = decodeURIComponent(match ? match[1] : "").trim().toUpperCase(); } catch { code = ""; }
  if (!RACE_CODE.test(code)) {
    return { error: "That race link is not valid: a race code is 8 letters and digits, like K7M2QX9P." };
  }
  return { code };
}

/** A fresh copy of a race from its `race` snapshot (deep copies: the message stays as it came). */
export function raceFromSnapshot(message) {
  const race = {};
  for (const key of ["race", "v", "code", "creator", "cells", "seats", "time_limit", "public", "state",
    "starts_at", "ends_at", "deal"]) race[key] = message[key];
  race.rows = message.rows.map((row) => ({ ...row }));
  race.rematch = message.rematch ? { ...message.rematch } : null;
  race.board_delay_ms = Number.isFinite(message.board_delay_ms) ? message.board_delay_ms : null;
  return race;
}

/**
 * Apply a `race_diff` of this race: "applied", "old" (a version already seen) or "gap" (one missed:
 * the caller sends `race_watch` again and starts over from its snapshot).
 */
export function applyRaceDiff(race, diff) {
  if (diff.race !== race.race || diff.v <= race.v) return "old";
  if (diff.v !== race.v + 1) return "gap";
  for (const key of ["v", "creator", "state", "starts_at", "ends_at", "deal"]) race[key] = diff[key];
  if (diff.rematch) race.rematch = { ...diff.rematch };
  const changed = new Map(diff.rows.map((row) => [row.seat, { ...row }]));
  const gone = new Set(diff.gone);
  race.rows = race.rows.filter((row) => !gone.has(row.seat) && !changed.has(row.seat));
  race.rows.push(...changed.values());
  race.rows.sort((a, b) => a.seat - b.seat);
  return "applied";
}

/** The row of player `playerId`, or null when it holds no seat (a spectator). */
export function myRow(race, playerId) {
  return race.rows.find((row) => row.player.id === playerId) ?? null;
}

/**
 * Whether the race can be started now, and if not why (the creator's Start button says it): the
 * creator's seat ready and one more. A start frees the seats not ready (`startFrees`).
 */
export function startProblem(race) {
  if (race.state !== "lobby") return "The race has started.";
  if (race.rows.length < 2) return "Waiting for a second player.";
  const creator = race.rows.find((row) => row.player.id === race.creator);
  if (creator && !creator.ready) return `Waiting for ${creator.player.name} to be ready.`;
  if (race.rows.filter((row) => row.ready).length < 2) {
    const waiting = race.rows.filter((row) => !row.ready).map((row) => row.player.name);
    return `Waiting for ${waiting.join(", ")} to be ready.`;
  }
  return null;
}

/** The names of the seats a start now would free (not ready). */
export function startFrees(race) {
  return race.rows.filter((row) => !row.ready).map((row) => row.player.name);
}

/** Whole seconds from `now` to `moment` (a timestamp), never below 0; null when either is unknown. */
export function secondsUntil(moment, now) {
  if (!moment || now === null || now === undefined) return null;
  return Math.max(0, Math.ceil((Date.parse(moment) - now) / 1000));
}

const STATUS_WORDS = { waiting: "waiting", playing: "playing", won: "won", resigned: "resigned", left: "left" };

/** "1st", "2nd", "3rd", "4th", "11th", "12th", "21st". */
export function ordinal(n) {
  const tens = n % 100;
  const suffix = tens >= 11 && tens <= 13 ? "th" : ({ 1: "st", 2: "nd", 3: "rd" }[n % 10] ?? "th");
  return `${n}${suffix}`;
}

/**
 * A seat's rating change, when the server sent one: `rating: {before, after}` of a finished race's
 * row (protocol/README.md, race; older shapes `rating_before` / `rating_after` are read too). Null
 * when there is none (a bot, or an unrated race): nothing is shown.
 */
export function ratingChange(row) {
  const rating = row.rating && typeof row.rating === "object" ? row.rating : null;
  const before = rating ? rating.before : row.rating_before;
  const after = rating ? rating.after : row.rating_after;
  if (!Number.isFinite(before) || !Number.isFinite(after)) return null;
  const delta = after - before;
  return { before, after, delta, text: `${after} (${delta >= 0 ? "+" : "−"}${Math.abs(delta)})` };
}

/** "1 move", "12 moves". */
export function movesText(moves) {
  return moves === 1 ? "1 move" : `${moves} moves`;
}

/**
 * The standings as the bars show them, in seat order (a bar's place in the list never jumps while
 * people play): each seat's name, whether it is the viewer's, its progress (cards home of 52), its
 * figures, its status in words and, once the race is over, its place.
 */
export function standings(race, playerId) {
  const over = race.state === "finished" || race.state === "cancelled";
  return race.rows.map((row) => ({
    seat: row.seat,
    name: row.player.name,
    mine: row.player.id === playerId,
    creator: row.player.id === race.creator,
    ready: row.ready,
    progress: row.cards_home / 52,
    cardsHome: row.cards_home,
    moves: row.moves,
    score: row.score,
    timeMs: row.time_ms,
    status: row.status,
    // A seat still playing when the race ended keeps its game unfinished.
    statusText: row.status === "playing" && over ? "unfinished" : (STATUS_WORDS[row.status] ?? row.status),
    place: row.place,
    game: row.game,
    rating: ratingChange(row),
  }));
}

/** The places once the race is over: seats by place, then seat (ties share a place). */
export function results(race, playerId) {
  return standings(race, playerId)
    .filter((row) => row.place !== null && row.place !== undefined)
    .sort((a, b) => a.place - b.place || a.seat - b.seat);
}

/** The headline of a race's end, for the viewer. */
export function resultTitle(race, playerId) {
  if (race.state === "cancelled") return "The race was cancelled";
  const mine = myRow(race, playerId);
  if (!mine || mine.place === null || mine.place === undefined) {
    const first = results(race, playerId)[0];
    return first ? `${first.name} won the race` : "The race is over";
  }
  const tied = race.rows.filter((row) => row.place === mine.place).length > 1;
  if (mine.place === 1 && !tied) return "You won the race!";
  return `You placed ${ordinal(mine.place)} of ${race.rows.length}${tied ? " (tied)" : ""}`;
}

/** Why the race ended, in a player's words (the places say who; this says how). */
export function endReason(race) {
  if (race.state === "cancelled") return "It was cancelled before the start (everyone left, or it waited too long).";
  if (race.rows.some((row) => row.status === "won")) return "The first to win takes the race.";
  if (race.rows.some((row) => row.status === "playing")) return "Time is up: most cards home wins, then fewer moves.";
  return "Nobody is still playing.";
}

/**
 * What the end of a race offers the viewer about a rematch: null (the race is not finished), else
 * `{label, fields}` of the request to send. A seat asks `race_rematch` ("Rematch" makes it, "Join the
 * rematch" once one was made: the same request joins it); a spectator may join a rematch made, by code.
 */
export function rematchOffer(race, playerId) {
  if (race.state !== "finished") return null;
  if (myRow(race, playerId)) {
    return { label: race.rematch ? "Join the rematch" : "Rematch", type: "race_rematch", fields: { race: race.race } };
  }
  return race.rematch ? { label: "Join the rematch", type: "race_join", fields: { code: race.rematch.code } } : null;
}

/** Whether the viewer sees the seats' boards: a spectator (no seat) of a race under way or over. */
export function showsBoards(race, playerId) {
  return (race.state === "running" || race.state === "finished") && myRow(race, playerId) === null;
}

/** The spectator's note on how late the boards are (the server says in `board_delay_ms`). */
export function boardDelayText(race) {
  if (race.state === "finished") return "The race is over: these are the final boards.";
  const ms = race.board_delay_ms;
  if (!Number.isFinite(ms)) return "You are watching: the boards are shown late, so that no racer can be helped.";
  const seconds = Math.round(ms / 100) / 10;
  return `You are watching: each board is shown ${seconds} s late, so that no racer can be helped.`;
}

/**
 * A board as a small picture reads it: each foundation's top, the cells, the columns (bottom first),
 * from a `race_board`'s `board` (a snapshot). Null for anything that is not a board.
 */
export function miniBoard(board) {
  if (!board || !Array.isArray(board.tableau) || !Array.isArray(board.cells)) return null;
  return {
    game: board.game,
    v: board.v,
    foundations: ["S", "H", "D", "C"].map((suit) => ({ suit, top: board.foundations?.[suit] ?? null })),
    cells: board.cells.map((card) => card ?? null),
    tableau: board.tableau.map((column) => [...column]),
    moves: board.moves,
    status: board.status,
  };
}

/** A refusal of a race request, in player words (the server's text is for developers). */
export function raceRefusal(request, error) {
  if (error.code === "not_found" && request === "race_join") return "No race has that code. Check the link or the code.";
  if (error.code === "not_found") return "That race is no longer there.";
  if (error.code === "rate_limited") return "Too many races too fast: wait a minute and try again.";
  if (request === "race_join" && error.code === "illegal_move") {
    if (/full/.test(error.message)) return "That race is full.";
    if (/started/.test(error.message)) return "That race has already started: it can't be joined now.";
    return "That race is over.";
  }
  if (request === "race_start" && /not ready/.test(error.message)) return "Your seat and one more must be ready first.";
  if (request === "race_rematch" && error.code === "illegal_move") {
    if (/full/.test(error.message)) return "The rematch is full.";
    if (/started/.test(error.message)) return "The rematch has already started without you.";
    return "A rematch can only follow a finished race you played in.";
  }
  if (request === "race_start" && error.code === "forbidden") return "Only the race's creator starts it.";
  return error.message.charAt(0).toUpperCase() + error.message.slice(1);
}
