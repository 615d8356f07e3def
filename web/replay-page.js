// The page of one game, `/g/GAME_ID` (web/replay.html): the game move by move from its deal (first,
// back, play, forward, last, a slider, the keyboard), and, while it is being played, the moves as
// they come. Its stepping is web/replay.js; this module only talks to the server and draws.

import { Connection } from "./connection.js";
import { $, drawBoard, fitBoard } from "./render.js";
import {
  addChange, addGameOver, addPage, follow, gameIdOfPath, isComplete, keyAction, lastV, opAt, positionAt, step,
  timelineFromReplay,
} from "./replay.js";
import { cardText, formatDuration, pileText } from "./words.js";

const TOKEN_KEY = "eightoff.token";   // the same player as the main page (app.js)
const NAME_KEY = "eightoff.name";
const PLAY_MS = 600;                  // a beat of "play": one move

const gameId = gameIdOfPath(location.pathname);
let timeline = null;
let view = { at: 0, playing: false };
let placed = false;        // the view was put where a fresh page starts: the deal, or a live game's end
let paging = false;        // a `replay` page is on its way
let watching = false;      // the game is being played and this page follows its diffs
let problem = null;        // {state, text}: what stops the page showing the game
let timer = null;

function storageGet(key) {
  try { return localStorage.getItem(key); } catch { return null; }
}

function storageSet(key, value) {
  try {
    if (value === null) localStorage.removeItem(key);
    else localStorage.setItem(key, value);
  } catch { /* private mode: the player lasts as long as the page */ }
}

const conn = new Connection({
  onStatus(status) {
    document.body.dataset.connection = status;
    $("#connection").textContent = { connecting: "Connecting…", open: "Connected", closed: "Disconnected — reconnecting…" }[status];
    if (status === "open") hello();
    else watching = false;
    paging = paging && status === "open";
  },
  onMessage(message, request) {
    if (message.game !== gameId || request) return;  // replies are handled where they are asked
    if (message.type === "diff" || message.type === "snapshot") changed(message);
    else if (message.type === "game_over" && timeline) {
      addGameOver(timeline, message);
      watching = false;
      render();
    }
  },
});

/** Say hello as the player of this browser (a new guest on a first visit, kept for the main page). */
async function hello() {
  const token = storageGet(TOKEN_KEY);
  const name = storageGet(NAME_KEY);
  const welcome = await conn.request("hello", { protocol: 1, token: token || undefined, name: token ? undefined : name || undefined });
  if (!welcome) return;
  if (welcome.type === "error" && token && welcome.code === "unauthorized") {
    storageSet(TOKEN_KEY, null);  // a token this server does not know: come as a new guest
    hello();
    return;
  }
  if (welcome.type !== "welcome") return stop("error", welcome.message);
  if (welcome.token) storageSet(TOKEN_KEY, welcome.token);
  sync();
}

/** Ask for what is missing: the next page of steps, then the moves to come of a game being played. */
async function sync() {
  if (problem || paging || !conn.isOpen) return;
  if (timeline === null || !isComplete(timeline)) {
    paging = true;
    const reply = await conn.request("replay", { game: gameId, since: timeline ? lastV(timeline) : 0 });
    paging = false;
    if (!reply) return;  // the connection went: hello again on reconnect
    if (reply.type === "error") return refused(reply);
    const before = timeline ? lastV(timeline) : 0;
    if (timeline === null) timeline = timelineFromReplay(reply);
    else addPage(timeline, reply);
    view = follow(view, before, timeline);
    sync();
  } else if (timeline.status === "playing" && !watching) {
    watching = true;
    const reply = await conn.request("watch", { game: gameId });
    if (!reply) return;
    if (reply.type === "error") {
      watching = false;
      return refused(reply);
    }
    changed(reply);
  }
  render();
}

/** A change of the game being played (a diff, or the snapshot of watching it). */
function changed(message) {
  if (!timeline) return;
  const before = lastV(timeline);
  if (addChange(timeline, message) === "gap") sync();
  view = follow(view, before, timeline);
  render();
}

function refused(error) {
  const states = { forbidden: "sealed", not_found: "missing" };
  const text = error.code === "not_found"
    ? `There is no game ${gameId} on this server: check the link.`
    : error.code === "forbidden" ? `This game is sealed for now. ${error.message}.` : `The server says: ${error.message}`;
  stop(states[error.code] ?? "error", text);
}

function stop(state, text) {
  problem = { state, text };
  render();
}

function go(action) {
  if (!timeline) return;
  view = step(view, timeline, action);
  clearInterval(timer);
  timer = view.playing ? setInterval(() => go("tick"), PLAY_MS) : null;
  render();
}

/** The move that made the shown position, in words ("Move 12: 7♥ from column 3 to the ♥ foundation"). */
function moveText() {
  const op = opAt(timeline, view.at);
  if (!op) return "The deal.";
  const undo = view.at >= 2 && timeline.steps[view.at - 1].moves < timeline.steps[view.at - 2].moves;
  const cards = op.cards.length === 1 ? cardText(op.cards[0]) : `${op.cards.length} cards from ${cardText(op.cards[0])}`;
  return `${undo ? "Undo" : "Move"} ${view.at}: ${cards} from ${pileText(op.from)} to ${pileText(op.to)}.`;
}

function render() {
  document.body.dataset.state = problem ? problem.state : timeline ? (isComplete(timeline) ? "ready" : "loading") : "loading";
  const message = $("#message");
  message.textContent = problem ? problem.text : "";
  message.dataset.kind = problem ? "error" : "";
  const shown = timeline !== null && problem === null;
  $("#replay-controls").hidden = !shown;
  $("#game-info").hidden = !shown;
  $("#board").hidden = !shown;
  if (!shown) {
    $("#replay-move").textContent = "";
    return;
  }
  if (!placed && isComplete(timeline)) {  // a finished game opens at its deal, a live one at its end
    placed = true;
    view = { at: timeline.status === "playing" ? lastV(timeline) : 0, playing: false };
  }
  const board = positionAt(timeline, view.at);
  const last = lastV(timeline);
  document.title = `Eight Off · ${timeline.player.name} · ${timeline.code}`;
  const result = { playing: "Playing now", won: "Won", resigned: "Resigned" }[timeline.status];
  const fields = {
    owner: timeline.player.name,
    code: timeline.code,
    result,
    score: board.score,
    moves: board.moves,
    time: timeline.durationMs === null ? "–" : formatDuration(timeline.durationMs),
  };
  for (const [name, value] of Object.entries(fields)) $(`#game-info [data-field="${name}"]`).textContent = String(value);
  const slider = $("#replay-slider");
  slider.max = String(last);
  slider.value = String(view.at);
  $("#replay-position").textContent = `${view.at} / ${last}`;
  $("#replay-play").textContent = view.playing ? "Pause" : "Play";
  $("#replay-play").setAttribute("aria-pressed", String(view.playing));
  $("#replay-first").disabled = $("#replay-back").disabled = view.at === 0;
  $("#replay-forward").disabled = $("#replay-last").disabled = view.at === last;
  $("#replay-live").hidden = !watching;
  $("#replay-move").textContent = moveText();
  const node = $("#board");
  node.dataset.game = timeline.game;
  node.dataset.v = String(view.at);
  node.dataset.status = board.status;
  drawBoard(board);
}

function bind() {
  $("#replay-controls").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-action]");
    if (button) go(button.dataset.action);
  });
  $("#replay-slider").addEventListener("input", (event) => go({ seek: Number(event.target.value) }));
  document.addEventListener("keydown", (event) => {
    if (event.target.id === "replay-slider" || event.altKey || event.ctrlKey || event.metaKey) return;  // the slider steps itself
    const action = keyAction(event.key);
    if (action === null || (event.target.closest("button") && event.key === " ")) return;  // space presses a focused button
    event.preventDefault();
    go(action);
  });
  window.addEventListener("resize", () => { if (timeline && !problem) fitBoard(positionAt(timeline, view.at)); });
}

bind();
if (gameId === null) {
  let named = location.pathname.replace(/^\/g\/?/, "");
  try { named = decodeURIComponent(named); } catch { /* shown as it came */ }
  stop("bad", `This link names no game: "${named.slice(0, 40) || "nothing"}" is not a game id (1 to 32 letters, digits, - or _).`);
} else {
  conn.connect();
}
