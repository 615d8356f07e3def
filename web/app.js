// Eight Off browser client: ES modules, no build step. This module composes them and owns the state:
//   connection.js   the WebSocket and its requests
//   board.js        the board copied from a snapshot and kept exact by the ops of ack/diff
//   render.js       the DOM drawn from the state
//   input.js        pointer and keyboard gestures turned into requests
//   leaderboards.js the leaderboard panel and profiles
//   race-view.js    the race screens (race.js: the race's copy); a seat's game is the ordinary board
//   words.js        what a player reads (cards, refusals, times)
//   animate.js      moved cards fly from where they were (render.js calls it)
//   celebrate.js    a short celebration of a win, under the result
//   sound.js        optional WebAudio sounds, off until the player turns them on
//   names.js        names with a tag from the player id, to tell two "Cleo"s apart
// The server is authoritative: the client never decides whether a move is legal.

import { applyChange, boardFromSnapshot, liftProblem, pileCards } from "./board.js";
import { celebrate, stopCelebration } from "./celebrate.js";
import { ServerClock, fetchServerTime } from "./clock.js";
import { Connection } from "./connection.js";
import { bindInput } from "./input.js";
import { Leaderboards } from "./leaderboards.js";
import { RaceView } from "./race-view.js";
import { $, fitBoard, render, renderClock, renderMarks } from "./render.js";
import { Sound, soundFor } from "./sound.js";
import { cardText, liftText, pileText, playerReason } from "./words.js";

const TOKEN_KEY = "eightoff.token";          // localStorage: the player survives reloads
const NAME_KEY = "eightoff.name";            // localStorage: the name the player chose
const CURRENT_KEY = "eightoff.current";      // sessionStorage: this tab's game, resumed after a reload
const CODES_KEY = "eightoff.codes";          // localStorage: game id -> code, to label unfinished games
const HINTED_KEY = "eightoff.hinted";        // localStorage: the games whose hint cost the player accepted
const LIVE_REFRESH_MS = 3000;                // while the live list is on screen (the server drops a
                                             // game within a second of its last follower leaving)

const state = {
  connection: "connecting",  // connecting | open | closed
  player: null,              // {id, name}
  myGames: [],               // ids of the player's unfinished games
  live: [],                  // rows of the last `live` reply
  mode: null,                // "play" | "watch" | null
  board: null,               // the shown game (board.js)
  selection: null,           // {pile, n}: the cards picked up by a tap
  hint: null,                // {from, to, n}: the hinted move (`to` a pile of the board), marked on it
  over: null,                // {won, score, moves, duration_ms?} once the shown game ended
  overRank: null,            // the player's rank on the finished deal's board
  message: null,             // {kind: "error" | "info", text}
  abandonArmed: null,        // the unfinished game whose "Abandon" was tapped once (a second tap resigns it)
};

const sound = new Sound(localStorage);

/** The server's clock (clock.js): a game's time is the server's, never this machine's. */
const clock = new ServerClock();

function serverNow() {
  return clock.ready ? clock.now() : null;  // null: not known yet, the clock shows "–"
}

function storageGet(store, key) {
  try { return store.getItem(key); } catch { return null; }
}

function storageSet(store, key, value) {
  try {
    if (value === null) store.removeItem(key); else store.setItem(key, value);
  } catch { /* storage disabled: the client still works, without surviving reloads */ }
}

function knownCodes() {
  try { return JSON.parse(storageGet(localStorage, CODES_KEY) || "{}"); } catch { return {}; }
}

function rememberCode(game, code) {
  const codes = knownCodes();
  if (codes[game] === code) return;
  codes[game] = code;
  const ids = Object.keys(codes);
  for (const old of ids.slice(0, Math.max(0, ids.length - 50))) delete codes[old];
  storageSet(localStorage, CODES_KEY, JSON.stringify(codes));
}

function say(kind, text) {
  state.message = text ? { kind, text } : null;
}

const conn = new Connection({ onMessage: handleMessage, onStatus: handleStatus, onPending: showBusy });
const boards = new Leaderboards({
  connection: conn,
  player: () => state.player,
  shownCode: () => (state.board ? state.board.code : null),
  playDeal: (code) => leaveThen(() => newGame({ code })),
});

const races = new RaceView({
  connection: conn,
  player: () => state.player,
  now: serverNow,
  openGame: (game) => conn.request("resume", { game }),
  shownGame: () => (state.board && state.mode === "play" ? state.board.game : null),
  showTable: () => showTab("table"),
  watchGame: (game) => leaveThen(() => conn.request("watch", { game })),
});

let drawPending = false;

/** Draw once in the next frame, however many messages arrive before it (a burst of diffs is one draw). */
function draw() {
  if (drawPending) return;
  drawPending = true;
  showBusy();
  requestAnimationFrame(() => {
    drawPending = false;
    render(state, knownCodes(), serverNow());
    boards.render();
    races.render();
    showBusy();
  });
}

/** `data-busy` on the body while a request awaits its reply or a draw is due: its absence says that
 * the page shows all it was told and expects nothing (what a test waits for instead of a fixed time). */
function showBusy() {
  document.body.toggleAttribute("data-busy", conn.pending.size > 0 || drawPending);
}

function addMyGame(game) {
  if (!state.myGames.includes(game)) state.myGames = [game, ...state.myGames];
}

function dropMyGame(game) {
  state.myGames = state.myGames.filter((id) => id !== game);
}

// Session ----------------------------------------------------------------------------------------------

function handleStatus(status) {
  state.connection = status;
  if (status === "open") {
    hello();
    clock.sync(fetchServerTime).then(draw);  // again after a reconnect: it may be another node
  }
  draw();
}

/** Say hello as the stored player; a first visit asks for a name first (the server picks one if skipped). */
function hello() {
  const token = storageGet(localStorage, TOKEN_KEY);
  if (token) {
    conn.request("hello", { protocol: 1, token });
  } else if (storageGet(localStorage, NAME_KEY) !== null) {
    conn.request("hello", { protocol: 1, name: storageGet(localStorage, NAME_KEY) || undefined });
  } else {
    openNameDialog();
  }
}

function openNameDialog() {
  const dialog = $("#name-dialog");
  $("#name-input").value = state.player ? state.player.name : storageGet(localStorage, NAME_KEY) ?? "";
  $("#name-note").hidden = state.player === null;
  if (state.player) $("#name-note").textContent = `A new name starts a new player: the games and ranks of ${state.player.name} stay with that name.`;
  if (!dialog.open) dialog.showModal();
  $("#name-input").focus();
}

/** The name chosen ("" lets the server pick): kept, then a fresh hello as a new player with it. */
function chooseName(name) {
  storageSet(localStorage, NAME_KEY, name);
  $("#name-dialog").close();
  if (state.player === null) {
    if (conn.isOpen) hello();
  } else if (name && name !== state.player.name) {
    storageSet(localStorage, TOKEN_KEY, null);
    storageSet(sessionStorage, CURRENT_KEY, null);
    Object.assign(state, { player: null, myGames: [], board: null, mode: null, over: null, selection: null });
    conn.reconnect();
  }
  draw();
}

/** Ask for a fresh snapshot of the shown game: resume one's own, watch anyone's. */
function resync() {
  if (state.board) conn.request(state.mode === "watch" ? "watch" : "resume", { game: state.board.game });
}

const HANDLERS = {
  welcome(message) {
    state.player = message.player;
    if (message.token) storageSet(localStorage, TOKEN_KEY, message.token);
    if (storageGet(localStorage, NAME_KEY) === null) storageSet(localStorage, NAME_KEY, message.player.name);
    state.myGames = [...message.games];
    if (state.board) {
      resync();  // after a reconnect: pick the shown game up again
    } else {
      const current = storageGet(sessionStorage, CURRENT_KEY);
      if (current && state.myGames.includes(current)) conn.request("resume", { game: current });
    }
    requestLive();
    boards.refreshIfOpen();
    races.welcome();
  },

  snapshot(message, request) {
    const previous = state.board;
    if (!request && previous && previous.game !== message.game) return; // a resync of a game not shown
    const mode = request && request.type === "watch" ? "watch" : request ? "play" : state.mode;
    if (previous && (previous.game !== message.game || mode !== state.mode)) {
      // Leave the board we stop showing: its diffs are no use any more, and the server limits how
      // many games one connection follows.
      conn.request("unwatch", { game: previous.game });
    }
    state.mode = mode;
    if (!previous || previous.game !== message.game) stopCelebration();
    state.board = boardFromSnapshot(message);
    Object.assign(state, { selection: null, hint: null, over: null, overRank: null });
    if (message.status !== "playing") {
      state.over = { won: message.status === "won", score: message.score, moves: message.moves };
    }
    if (mode === "play") {
      rememberCode(message.game, message.code);
      storageSet(sessionStorage, CURRENT_KEY, message.status === "playing" ? message.game : null);
      if (message.status === "playing") addMyGame(message.game); else dropMyGame(message.game);
    }
    if (request && ["new_game", "resume", "watch"].includes(request.type)) {
      say(null, null);
      if (document.body.dataset.tab !== "table") showTab("table");  // a game chosen on a phone's tab
    }
  },

  ack(message) {
    HANDLERS.diff(message);
  },

  diff(message) {
    const board = state.board;
    if (!board || board.game !== message.game) return;  // a game this tab does not show
    const result = applyChange(board, message);
    if (result === "gap") resync();
    if (result === "applied") {
      sound.play(soundFor(message));
      if (message.status !== "playing") board.endedAt = serverNow();  // until game_over's duration_ms
      state.hint = null;
      if (state.message && state.message.kind === "hint") say(null, null);  // it spoke of the old position
      if (message.status !== "playing") dropMyGame(message.game);
    }
  },

  game_over(message) {
    dropMyGame(message.game);
    const board = state.board;
    if (!board || board.game !== message.game) return;
    state.over = message;
    if (message.won) requestAnimationFrame(() => celebrate($("#board-wrap"), $("#game-over")));  // once drawn
    if (board.status === "playing") board.status = message.won ? "won" : "resigned";
    Object.assign(state, { selection: null, hint: null });
    if (state.mode === "play") {
      storageSet(sessionStorage, CURRENT_KEY, null);
      requestRank(board.game, board.code);
      boards.refreshIfOpen();  // the finished game now counts
    }
    requestLive();
  },

  live(message) {
    state.live = message.games;
  },

  error(message, request) {
    if (!request) return;
    if (request.type === "hello" && message.code === "unauthorized") {
      // The stored token is unknown to this server (a new database): start over as a new guest.
      storageSet(localStorage, TOKEN_KEY, null);
      hello();
    } else if (request.type === "hello") {
      storageSet(localStorage, NAME_KEY, null);  // a name the server refuses: ask again, with its reason
      openNameDialog();
      $("#name-note").hidden = false;
      $("#name-note").textContent = message.message;
    } else if (message.code === "stale") {
      say("info", "The board was out of date; it has been refreshed.");
      resync();
    } else if ((request.type === "resume" || request.type === "watch") && message.code === "not_found") {
      dropMyGame(request.fields.game);
      say("error", "That game is no longer there.");
    } else if (!["leaderboard", "profile", "hint", "tap", "move", "auto", "undo"].includes(request.type)) {
      say("error", playerReason(message.message));  // the rest each say their own refusal
    }
  },
};

/** Phones: show one section (the table, a new game, the games lists, the leaderboards). */
function showTab(tab) {
  document.body.dataset.tab = tab;
  for (const button of document.querySelectorAll("#tabs [data-tab]")) {
    button.setAttribute("aria-current", String(button.dataset.tab === tab));
  }
  if (tab === "boards" && !$("#leaderboards").open) $("#leaderboards").open = true;  // its toggle loads it
  if (tab === "table") requestAnimationFrame(() => fitBoard(state.board));
  window.scrollTo(0, 0);
}

function handleMessage(message, request) {
  if (races.handle(message, request)) return draw();
  const handler = HANDLERS[message.type];
  if (handler) handler(message, request);  // unknown types are ignored (protocol README section 12)
  draw();
}

// Requests the interface sends -----------------------------------------------------------------------

function requestLive() {
  conn.request("live", { limit: 20 });
}

/** The player's rank on the deal's board once a game is over (the row around them, by fewest moves). */
async function requestRank(game, code) {
  const reply = await conn.request("leaderboard", { board: "deal", code, around: state.player.id, limit: 1 });
  if (!reply || reply.type !== "leaderboard" || !state.board || state.board.game !== game) return;
  const row = reply.rows.find((each) => each.player.id === state.player.id);
  state.overRank = row ? row.rank : null;
  draw();
}

function playable() {
  return state.board !== null && state.mode === "play" && state.board.status === "playing";
}

/** An action on the shown game, at its version; returns the promise of the reply (or null). */
function act(type, fields = {}) {
  if (!playable()) return null;
  say(null, null);
  state.selection = null;
  const reply = conn.request(type, { game: state.board.game, v: state.board.v, ...fields });
  if (reply === null) say("error", "Not connected to the server; reconnecting…");
  draw();
  return reply;
}

function refused(reply) {
  if (reply.code === "stale") return;  // handled above: the board is refreshed
  sound.play("refused");
  say("error", playerReason(reply.message));
  draw();
}

function newGame(fields) {
  say(null, null);
  const sentAt = performance.now();
  conn.request("new_game", fields)?.then((reply) => {
    // The server read its clock for `started_at` while this request was out: a sample of it.
    if (reply && reply.type === "snapshot" && reply.v === 0) clock.sample(Date.parse(reply.started_at), sentAt, performance.now());
  });
}

function dealFields(cells, winnable) {
  return { cells, winnable: winnable || undefined };
}

function dealFromForm(form) {
  const deal = form.elements.deal.value;
  const cells = Number(form.elements.cells.value);
  if (deal === "code") {
    const code = form.elements.code.value.trim();
    if (!code) {
      say("error", "Type a game code such as EO1-C8-AAAAAFA.");
      draw();
      return;
    }
    newGame({ code });
  } else if (deal === "daily") {
    newGame({ cells, daily: true });
  } else {
    newGame(dealFields(cells, form.elements.winnable.checked));
  }
}

/** "Winnable deals only" follows the cell count (on for 4 and 2 cells) until the player sets it. */
let winnableTouched = false;
function syncWinnable() {
  const form = $("#new-game-form");
  if (!winnableTouched) form.elements.winnable.checked = Number(form.elements.cells.value) !== 8;
}

function cellsOf(code) {
  return Number(code.split("-")[1].slice(1));
}

/** Start the same deal again in one step: this game is given up (it counts as resigned). */
async function restart() {
  const board = state.board;
  if (!playable()) return;
  if (board.moves > 0) {
    const reply = await conn.request("resign", { game: board.game });
    if (!reply || reply.type === "error") return;
  }
  newGame({ code: board.code });
}

/**
 * Leave the shown game in progress only when the player says so (a new deal, another game): keep it
 * for later (it stays in the unfinished games) or give it up (resigned); `then` runs unless the player
 * stays. Games left unasked used to pile up in the list.
 */
let leaving = null;  // {game, then} while the question is open

function leaveThen(then) {
  if (!playable()) {
    then();
    return;
  }
  const board = state.board;
  leaving = { game: board.game, then };
  const moves = board.moves === 1 ? "1 move" : `${board.moves} moves`;
  $("#leave-text").textContent = `Your game ${board.code} is not finished (${moves}). Keep it in your `
    + "unfinished games to resume later, or give it up: it then counts as a resigned game.";
  $("#leave-dialog").returnValue = "";
  $("#leave-dialog").showModal();
}

async function leaveChosen(choice) {
  const pending = leaving;
  leaving = null;
  if (!pending || (choice !== "keep" && choice !== "resign")) return;  // "Stay", or Esc
  if (choice === "resign") {
    const reply = await conn.request("resign", { game: pending.game });
    if (!reply || (reply.type === "error" && reply.code !== "illegal_move")) {  // illegal_move: over already
      if (reply) say("error", playerReason(reply.message));
      draw();
      return;
    }
  }
  pending.then();
}

/** "Abandon" on an unfinished game of the list: a first tap asks, a second (within 3 s) resigns it. */
let abandonTimer = null;
function abandon(game) {
  clearTimeout(abandonTimer);
  if (state.abandonArmed === game) {
    state.abandonArmed = null;
    conn.request("resign", { game });
  } else {
    state.abandonArmed = game;
    abandonTimer = setTimeout(() => {
      state.abandonArmed = null;
      draw();
    }, 3000);
  }
  draw();
}

function armTwice(button, label, confirm, action) {
  let armed = null;
  button.addEventListener("click", () => {
    if (armed === null) {
      button.textContent = confirm;
      armed = setTimeout(() => {
        armed = null;
        button.textContent = label;
      }, 3000);
      return;
    }
    clearTimeout(armed);
    armed = null;
    button.textContent = label;
    action();
  });
}

function hintedGames() {
  try { return JSON.parse(storageGet(localStorage, HINTED_KEY) || "[]"); } catch { return []; }
}

/** The first hint of a game asks first, saying plainly what it costs (a tooltip no finger sees did
 * before); once accepted, the game's next hints are asked at once. */
function hintAsked() {
  if (!playable()) return;
  if (hintedGames().includes(state.board.game)) {
    askHint();
    return;
  }
  hintFor = state.board.game;
  $("#hint-dialog").returnValue = "";
  $("#hint-dialog").showModal();
}

let hintFor = null;  // the game the hint question is about, while open

function hintChosen(choice) {
  const game = hintFor;
  hintFor = null;
  if (choice !== "accept" || !playable() || state.board.game !== game) return;
  storageSet(localStorage, HINTED_KEY, JSON.stringify([...hintedGames(), game].slice(-100)));
  askHint();
}

/** The solver's word on the position, shown only because the player asked (the seeds forbid announcing
 * a loss unasked). It is a message of kind "hint": the next change of the board takes it away. */
async function askHint() {
  if (!playable()) return;
  const game = state.board.game;
  const reply = await conn.request("hint", { game });  // `hint` takes no `v`
  if (!reply || !state.board || state.board.game !== game) return;
  if (reply.type === "error") {
    refused(reply);
    return;
  }
  if (reply.v !== state.board.v) return;  // the board moved on meanwhile (another tab): stale advice
  if (reply.verdict === "win") {
    const { from, to, n } = reply.action;
    const cards = pileCards(state.board, from);
    const card = cards[cards.length - n];
    const target = to[0] === "f" ? `f${card[1]}` : to;  // "f" or "fH": the card's own foundation
    state.hint = { from, to: target, n };
    const what = n > 1 ? `the run from ${cardText(card)}` : cardText(card);
    say("hint", `Hint: ${what} to ${pileText(target)}.`);
  } else if (reply.verdict === "lost") {
    say("hint", "There is no way to win from here. Undo a few moves, or restart the deal.");
  } else {
    say("hint", "The solver found no sure way on from here.");
  }
  draw();
}

// Wiring -------------------------------------------------------------------------------------------------

function bind() {
  bindInput($("#board"), {
    playable,
    getSelection: () => state.selection,
    setSelection: (selection) => {
      state.selection = selection;
      renderMarks(state.selection, state.hint);
    },
    tap: (pile) => act("tap", { from: pile }),
    auto: (pile, n) => act("auto", { from: pile, n: n > 1 ? n : undefined }),
    move: (from, to, n) => act("move", { from, to: to[0] === "f" ? "f" : to, n: n > 1 ? n : undefined }),
    undo: () => act("undo"),
    refused,
    liftProblem: (pile, n) => {
      const problem = liftProblem(state.board, pile, n);
      return problem && liftText(pileCards(state.board, pile).slice(-n), problem);
    },
    explain: (text) => {
      say("error", text);
      draw();
    },
  });
  $("#undo").addEventListener("click", () => act("undo")?.then((reply) => reply?.type === "error" && refused(reply)));
  $("#hint").addEventListener("click", hintAsked);
  $("#hint-dialog").addEventListener("close", () => hintChosen($("#hint-dialog").returnValue));
  armTwice($("#restart"), "Restart", "Restart? Tap again", restart);
  armTwice($("#resign"), "Resign", "Really resign?", () => {
    if (playable()) conn.request("resign", { game: state.board.game });
  });
  $("#unwatch").addEventListener("click", () => {
    if (state.mode === "watch" && state.board) conn.request("unwatch", { game: state.board.game });
    Object.assign(state, { board: null, mode: null, over: null });
    stopCelebration();
    draw();
  });
  const soundButton = $("#sound");
  const showSound = () => {
    soundButton.setAttribute("aria-pressed", String(sound.on));
    soundButton.textContent = sound.on ? "Sound on" : "Sound off";
  };
  soundButton.addEventListener("click", () => {
    sound.set(!sound.on);
    showSound();
  });
  showSound();
  $("#play-again").addEventListener("click", () => newGame({ code: state.board.code }));
  $("#next-deal").addEventListener("click", () => {
    const cells = cellsOf(state.board.code);
    newGame(dealFields(cells, cells !== 8));
  });
  $("#refresh-live").addEventListener("click", requestLive);
  $("#quick-deal").addEventListener("click", () => leaveThen(() => dealFromForm($("#new-game-form"))));
  const form = $("#new-game-form");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    leaveThen(() => dealFromForm(form));
  });
  $("#leave-dialog").addEventListener("close", () => leaveChosen($("#leave-dialog").returnValue));
  form.elements.cells.addEventListener("change", syncWinnable);
  form.elements.winnable.addEventListener("change", () => { winnableTouched = true; });
  $("#code").addEventListener("input", () => {
    form.elements.deal.value = "code";
  });
  const resumeOrWatch = (event) => {
    const resume = event.target.closest("[data-resume]");
    const watch = event.target.closest("[data-watch]");
    const abandoned = event.target.closest("[data-abandon]");
    if (resume) leaveThen(() => conn.request("resume", { game: resume.dataset.resume }));
    if (watch) leaveThen(() => conn.request("watch", { game: watch.dataset.watch }));
    if (abandoned) abandon(abandoned.dataset.abandon);
  };
  $("#my-games").addEventListener("click", resumeOrWatch);
  $("#live-games").addEventListener("click", resumeOrWatch);
  $("#rename").addEventListener("click", openNameDialog);
  $("#name-dialog").addEventListener("cancel", (event) => {
    event.preventDefault();  // Esc on a first visit is "let the server pick"
    chooseName(state.player ? state.player.name : "");
  });
  $("#name-form").addEventListener("submit", (event) => {
    event.preventDefault();
    chooseName(event.submitter && event.submitter.value === "skip" ? "" : $("#name-input").value.trim());
  });
  boards.bind();
  races.bind();
  syncWinnable();
  // Phones: the sections are tabs; the board is fitted again when the screen turns or resizes.
  $("#tabs").addEventListener("click", (event) => {
    const tab = event.target.closest("[data-tab]");
    if (tab) showTab(tab.dataset.tab);
  });
  window.addEventListener("resize", () => fitBoard(state.board));
  bindLiveRefresh();
  tickClock();
}

/** Keep the live list fresh while it is on screen: asked again every LIVE_REFRESH_MS, and at once when it
 * comes into view (a phone's tab, a scroll) or the page is shown again; never while nobody sees it. */
function bindLiveRefresh() {
  let inView = false;
  const refresh = () => {
    if (conn.isOpen && state.player && inView && document.visibilityState === "visible") requestLive();
  };
  new IntersectionObserver((entries) => {
    const was = inView;
    inView = entries.some((entry) => entry.isIntersecting);
    if (inView && !was) refresh();
  }).observe($("#live-title"));
  document.addEventListener("visibilitychange", refresh);
  setInterval(refresh, LIVE_REFRESH_MS);
}

/** Redraw the game's clock just after each of its seconds turns (not on a timer of its own phase,
 * which would show each second up to a second late). */
function tickClock() {
  const now = serverNow();
  if (state.board) renderClock(state, now);
  const into = state.board && now !== null ? (now - Date.parse(state.board.startedAt)) % 1000 : 0;
  setTimeout(tickClock, 1000 - ((into + 1000) % 1000) + 5);
}

bind();
draw();
conn.connect();
