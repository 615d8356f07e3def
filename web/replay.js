// The replay viewer's model: a game's timeline (its deal and one step per version, from `replay`
// pages and, for a game being played, the `diff`s of watching it) and where the viewer stands on it.
// It knows no rule of the game and touches no DOM: a position is the deal with the ops of its steps
// applied (protocol/README.md, `replay`), so node's test runner checks it without a browser.

import { applyOp } from "./board.js";

/** Game ids as the protocol has them (section 3): what `/g/ID` must name. */
const GAME_ID = /^[A-Za-z0-9_-]{1,32}$/;

/** The game id of a page path `/g/ID`, or null when the path names no game id. */
export function gameIdOfPath(path) {
  const match = /^\/g\/([^/]*)$/.exec(path);
  if (!match) return null;
  let id;
  try { id = decodeURIComponent(match[1]); } catch { return null; }
  return GAME_ID.test(id) ? id : null;
}

/** A timeline from the first `replay` page (since 0): deep copies, the message stays as it came. */
export function timelineFromReplay(reply) {
  const timeline = {
    game: reply.game,
    code: reply.code,
    player: reply.player,
    startedAt: reply.started_at,
    status: reply.status,
    durationMs: reply.duration_ms ?? null,
    v: reply.v,    // the game's version as last heard: steps.length < v means pages are missing
    deal: { tableau: reply.tableau.map((column) => [...column]), cells: [...reply.cells], foundations: { ...reply.foundations } },
    steps: [],
    cached: null,  // the last position computed: stepping forward goes on from it
  };
  addPage(timeline, reply);
  return timeline;
}

/** The last version the timeline can show. */
export function lastV(timeline) {
  return timeline.steps.length;
}

/** Whether every version up to the game's own is in the timeline (no page to ask for). */
export function isComplete(timeline) {
  return timeline.steps.length >= timeline.v;
}

function hear(timeline, v, status) {
  if (v >= timeline.v) {
    timeline.v = v;
    timeline.status = status;
  }
}

/**
 * Add a `replay` page. Steps already held are skipped (a page may overlap diffs heard meanwhile).
 * Returns "applied", or "gap" when the page starts past the last held step (ask again from there).
 */
export function addPage(timeline, reply) {
  if (reply.since > timeline.steps.length) return "gap";
  reply.steps.forEach((step, index) => {
    if (reply.since + index === timeline.steps.length) {
      timeline.steps.push({ ops: step.ops.map((op) => ({ ...op, cards: [...op.cards] })), score: step.score, moves: step.moves });
    }
  });
  hear(timeline, reply.v, reply.status);
  if (reply.duration_ms !== undefined) timeline.durationMs = reply.duration_ms;
  return "applied";
}

/**
 * A `diff` of the watched game (or a `snapshot` of it, which says only its version and status).
 * Returns "applied", "old" (already held) or "gap" (versions are missing: ask for a page).
 */
export function addChange(timeline, message) {
  if (message.type === "snapshot") {
    hear(timeline, message.v, message.status);
    return isComplete(timeline) ? "old" : "gap";
  }
  if (message.v <= timeline.steps.length) return "old";
  if (message.v !== timeline.steps.length + 1) {
    hear(timeline, message.v, message.status);
    return "gap";
  }
  timeline.steps.push({ ops: message.ops, score: message.score, moves: message.moves });
  hear(timeline, message.v, message.status);
  return "applied";
}

/** The end of the game (`game_over`): its result and the time the server recorded. */
export function addGameOver(timeline, over) {
  timeline.status = over.won ? "won" : "resigned";
  timeline.durationMs = over.duration_ms;
}

/** The board at version `v` (clamped to what is held), in the shape board.js and render.js draw. */
export function positionAt(timeline, v) {
  const at = Math.max(0, Math.min(v, timeline.steps.length));
  let board = timeline.cached;
  if (board === null || board.v > at) {
    board = {
      v: 0,
      tableau: timeline.deal.tableau.map((column) => [...column]),
      cells: [...timeline.deal.cells],
      foundations: { ...timeline.deal.foundations },
      score: 0,
      moves: 0,
    };
  } else {
    board = { ...board, tableau: board.tableau.map((column) => [...column]), cells: [...board.cells], foundations: { ...board.foundations } };
  }
  for (; board.v < at; board.v += 1) {
    const step = timeline.steps[board.v];
    for (const op of step.ops) applyOp(board, op);
    board.score = step.score;
    board.moves = step.moves;
  }
  timeline.cached = board;
  return {
    game: timeline.game,
    code: timeline.code,
    player: timeline.player,
    startedAt: timeline.startedAt,
    v: at,
    tableau: board.tableau.map((column) => [...column]),
    cells: [...board.cells],
    foundations: { ...board.foundations },
    score: board.score,
    moves: board.moves,
    status: at === timeline.steps.length ? timeline.status : "playing",
  };
}

/** The op of the step that made version `v` (null at the deal): what the viewer names as the move. */
export function opAt(timeline, v) {
  return v >= 1 && v <= timeline.steps.length ? timeline.steps[v - 1].ops[0] : null;
}

/**
 * Where the viewer goes: `{at, playing}` after `action` ("first", "back", "forward", "last", "play"
 * (toggles), "tick" (a beat of play: one forward, stopping at the end), or {seek: v}).
 */
export function step(view, timeline, action) {
  const last = lastV(timeline);
  const clamp = (v) => Math.max(0, Math.min(v, last));
  if (typeof action === "object") return { at: clamp(action.seek), playing: false };
  switch (action) {
    case "first": return { at: 0, playing: false };
    case "back": return { at: clamp(view.at - 1), playing: false };
    case "forward": return { at: clamp(view.at + 1), playing: false };
    case "last": return { at: last, playing: false };
    case "play":
      if (view.playing) return { ...view, playing: false };
      return { at: view.at >= last ? 0 : view.at, playing: true };  // at the end, play starts over
    case "tick": {
      const at = clamp(view.at + 1);
      return { at, playing: at < last };
    }
    default: return view;
  }
}

/**
 * After the timeline grew by a live change: a viewer who stood at the old end follows the game to
 * its new end; one looking back stays where they are.
 */
export function follow(view, previousLast, timeline) {
  return view.at === previousLast && !view.playing ? { ...view, at: lastV(timeline) } : view;
}

/** The viewer's action for a key (null: not ours): arrows step, Home/End jump, space or k plays. */
export function keyAction(key) {
  return { ArrowLeft: "back", ArrowRight: "forward", Home: "first", End: "last", " ": "play", k: "play" }[key] ?? null;
}
