// Rendering: the DOM drawn from the app's state. Nothing here sends a request or changes state.

import { cardRects, flyFrom, landAll } from "./animate.js";
import { playerLabel, playerTag } from "./names.js";
import { SUITS, cardName, formatDuration, rankText } from "./words.js";

const FOUNDATIONS = ["S", "H", "D", "C"];

export const $ = (selector) => document.querySelector(selector);

/** A DOM element: `text` sets textContent, data-/aria-/role/type are attributes, the rest properties. */
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") node.textContent = value;
    else if (key.startsWith("data-") || key.startsWith("aria-") || key === "role" || key === "type") {
      node.setAttribute(key, value === true ? "" : value);
    } else node[key] = value;
  }
  node.append(...children);
  return node;
}

function cardElement(card, index) {
  const suit = SUITS[card[1]];
  return el(
    "button",
    {
      type: "button",
      className: `card ${suit.red ? "red" : "black"}`,
      "data-card": card,
      "data-index": String(index),
      "aria-label": cardName(card),
    },
    el("span", { className: "corner", "aria-hidden": "true", text: `${rankText(card)}${suit.symbol}` }),
    el("span", { className: "pip", "aria-hidden": "true", text: suit.symbol }),
  );
}

function pileElement(pile, label, cards, placeholder = "") {
  const node = el("div", {
    className: `pile pile-${pile[0]}`,
    "data-pile": pile,
    role: "group",
    "aria-label": label,
    tabIndex: cards.length === 0 ? 0 : undefined,  // an empty pile takes focus, to be a destination
  });
  if (cards.length === 0) node.append(el("span", { className: "placeholder", "aria-hidden": "true", text: placeholder }));
  cards.forEach((card, index) => node.append(cardElement(card, index)));
  return node;
}

let drawnBoard = null;
let drawnGame = null;

/** Redraw the piles, only when the board changed (so that a gesture keeps its elements meanwhile). */
function renderPiles(board) {
  const key = JSON.stringify([board.game, board.v, board.tableau, board.cells, board.foundations]);
  if (key === drawnBoard) return false;
  drawnBoard = key;
  const before = drawnGame === board.game ? cardRects() : null;
  drawnGame = board.game;
  $("#foundations").replaceChildren(
    ...FOUNDATIONS.map((suit) => {
      const top = board.foundations[suit];
      return pileElement(`f${suit}`, `Foundation ${SUITS[suit].name}`, top ? [top] : [], SUITS[suit].symbol);
    }),
  );
  const cells = $("#cells");
  cells.style.setProperty("--count", String(board.cells.length));
  cells.replaceChildren(...board.cells.map((card, i) => pileElement(`c${i + 1}`, `Cell ${i + 1}`, card ? [card] : [])));
  $("#tableau").replaceChildren(
    ...board.tableau.map((column, i) => pileElement(`t${i + 1}`, `Column ${i + 1}`, column, "K")),
  );
  if (before) flyFrom(before, $("#board"));  // animate.js: each moved card flies from where it was
  return true;
}

/** Phones: portrait, or landscape with little height (the media query of style.css's phone layout). */
const PHONE = "(max-width: 720px), (max-height: 500px)";
const MIN_STRIP_PX = 30;   // the least of a covered card that shows: a comfortable target for a finger
const GAP = 0.08;          // gaps and padding on a phone, in card widths
const PAD = 0.12;
const SIDE_PX = 170;

/**
 * Fit the board to a phone's screen: cards as wide as the width allows (in landscape the foundations
 * and cells share one row), no taller than lets the longest column show below them with strips of at
 * least MIN_STRIP_PX, and the strips as tall as the height then leaves (up to three quarters of a card). A column
 * too long for the screen keeps its strips and the page scrolls. Elsewhere the style sheet's sizes hold.
 */
export function fitBoard(board) {
  const node = $("#board");
  const props = ["--card-w", "--card-h", "--gap", "--shown", "--slots"];
  if (!board || node.hidden || !window.matchMedia(PHONE).matches) {
    for (const prop of props) node.style.removeProperty(prop);
    delete node.dataset.fit;
    return;
  }
  if (node.offsetParent === null) return;  // another tab is shown: fitted when the table is again
  const wide = window.innerWidth > window.innerHeight;
  const slots = wide ? Math.max(8, 4 + board.cells.length) : 8;
  const rows = wide ? 1 : 2;  // rows of piles above the tableau
  const strips = Math.max(5, ...board.tableau.map((column) => column.length)) - 1;
  // #table's width; in landscape the game bar takes a column of SIDE_PX beside the board
  const width = node.parentElement.parentElement.clientWidth - (wide ? SIDE_PX : 0);
  const height = window.innerHeight - (node.getBoundingClientRect().top + window.scrollY) - 6;
  const byWidth = width / (slots + (slots - 1) * GAP + 2 * PAD);
  // rows × (h + gap) + h + strips × MIN_STRIP + padding ≤ height, with h = 1.4 w and gap = GAP w
  const byHeight = (height - strips * MIN_STRIP_PX) / ((rows + 1) * 1.4 + rows * GAP + 2 * GAP + 2 * PAD);
  const w = Math.floor(Math.max(34, Math.min(byWidth, byHeight, 96)));
  const h = w * 1.4;
  const room = height - rows * (h + GAP * w) - h - 3 * GAP * w;
  const shown = Math.floor(Math.max(MIN_STRIP_PX, Math.min(h * 0.75, room / strips)));
  node.dataset.fit = wide ? "wide" : "tall";
  node.style.setProperty("--card-w", `${w}px`);
  node.style.setProperty("--card-h", `${h}px`);
  node.style.setProperty("--gap", `${GAP * w}px`);
  node.style.setProperty("--shown", `${shown}px`);
  node.style.setProperty("--slots", String(slots));
}

/** Mark the selected cards (the top `n` of a pile) and a hint's source and destination. */
export function renderMarks(selection, hint) {
  for (const node of document.querySelectorAll(".selected, .source, .hint, .hint-target")) {
    node.classList.remove("selected", "source", "hint", "hint-target");
  }
  const mark = (mark, className, pileClass) => {
    const pile = mark && document.querySelector(`[data-pile="${mark.pile}"]`);
    if (!pile) return;
    if (pileClass) pile.classList.add(pileClass);
    const cards = [...pile.querySelectorAll("[data-card]")];
    for (const card of cards.slice(cards.length - mark.n)) card.classList.add(className);
  };
  mark(selection, "selected", "source");
  if (hint) {
    mark({ pile: hint.from, n: hint.n }, "hint");
    const target = document.querySelector(`[data-pile="${hint.to}"]`);
    if (target) target.classList.add("hint-target");
  }
}

/** The time a game has run as the server will record it: from its deal to `now` (the server's clock,
 * null while unknown), its end once over, and the server's own `duration_ms` once it has said it. */
export function elapsedText(state, now) {
  if (state.over && state.over.duration_ms !== undefined) return formatDuration(state.over.duration_ms);
  const board = state.board;
  const end = board && board.status === "playing" ? now : board?.endedAt;
  if (end === null || end === undefined) return "–";
  return formatDuration(end - Date.parse(board.startedAt));
}

export function renderClock(state, now) {
  $('#game-info [data-field="time"]').textContent = elapsedText(state, now);
}

function renderBoard(state, now) {
  const board = state.board;
  const boardNode = $("#board");
  $("#empty-hint").hidden = board !== null;
  boardNode.hidden = board === null;
  $("#game-info").hidden = board === null;
  const playing = board !== null && state.mode === "play" && board.status === "playing";
  $("#toolbar").hidden = !(playing || state.mode === "watch");
  for (const id of ["undo", "restart", "resign"]) $(`#${id}`).hidden = !playing;
  $("#hint").hidden = !playing;
  $("#unwatch").hidden = state.mode !== "watch";
  if (!board) {
    drawnBoard = drawnGame = null;
    landAll();
    fitBoard(null);
    return false;
  }
  boardNode.dataset.mode = state.mode ?? "";
  boardNode.dataset.game = board.game;
  boardNode.dataset.v = String(board.v);
  boardNode.dataset.status = board.status;
  const fields = { code: board.code, score: board.score, moves: board.moves };
  for (const [name, value] of Object.entries(fields)) {
    $(`#game-info [data-field="${name}"]`).textContent = String(value);
  }
  const owner = $("#game-info [data-owner]");
  owner.hidden = state.mode !== "watch";
  $('#game-info [data-field="owner"]').textContent = playerLabel(board.player);
  renderClock(state, now);
  const redrawn = renderPiles(board);
  if (redrawn) fitBoard(board);
  return redrawn;
}

function renderGameOver(state) {
  const panel = $("#game-over");
  const over = state.over;
  panel.hidden = over === null || state.board === null;
  if (panel.hidden) return;
  panel.dataset.won = String(Boolean(over.won));
  const watching = state.mode === "watch";
  $("#game-over-title").textContent = over.won
    ? (watching ? `${playerLabel(state.board.player)} won!` : "You won!")
    : "Game over";
  const figures = {
    time: over.duration_ms !== undefined ? formatDuration(over.duration_ms) : "–",
    moves: over.moves,
    score: over.score,
    rank: state.overRank ? `#${state.overRank}` : "–",
  };
  for (const [name, value] of Object.entries(figures)) {
    panel.querySelector(`[data-field="${name}"]`).textContent = String(value);
  }
  panel.querySelector("[data-rank-row]").hidden = watching;
  $("#replay-link").href = `/g/${encodeURIComponent(state.board.game)}`;  // the game's page, to share
  $("#play-again").hidden = watching;
  $("#next-deal").hidden = watching;
}

function renderLists(state, codes) {
  const current = state.board && state.mode === "play" ? state.board.game : null;
  $("#my-games").replaceChildren(
    ...(state.myGames.length === 0
      ? [el("li", { className: "none", text: "None." })]
      : state.myGames.map((game) =>
        el(
          "li",
          { "data-my-game": game },
          el("span", { text: codes[game] ?? game }),
          ...(game === current
            ? [el("span", { className: "tag", text: "open" })]
            : [
              el("button", { type: "button", "data-resume": game, text: "Resume" }),
              el("button", {
                type: "button",
                "data-abandon": game,
                "data-armed": state.abandonArmed === game ? "true" : "false",
                title: "Give this game up: it counts as a resigned game",
                text: state.abandonArmed === game ? "Abandon? Tap again" : "Abandon",
              }),
            ]),
        ),
      )),
  );
  const watched = state.board && state.mode === "watch" ? state.board.game : null;
  $("#live-games").replaceChildren(
    ...(state.live.length === 0
      ? [el("li", { className: "none", text: "Nobody is playing right now." })]
      : state.live.map((row) => {
        const mine = state.player !== null && row.player.id === state.player.id;
        let action;
        if (row.game === watched) action = el("span", { className: "tag", text: "watching" });
        else if (row.game === current) action = el("span", { className: "tag", text: "your game" });
        else if (mine) action = el("button", { type: "button", "data-resume": row.game, text: "Resume" });
        else if (row.sealed) action = el("span", { className: "tag", text: "sealed" });  // a daily you can still play
        else action = el("button", { type: "button", "data-watch": row.game, text: "Watch" });
        return el(
          "li",
          { "data-live-game": row.game },
          el("span", { className: "who", text: `${playerLabel(row.player)}${mine ? " (you)" : ""}` }),
          el("span", { className: "what", text: `${row.code} · ${row.moves} moves · ${row.score} pts · ${row.watchers} watching` }),
          action,
        );
      })),
  );
}

/** Draw everything but the leaderboards; returns true when the piles were redrawn. */
export function render(state, codes, now) {
  const labels = { connecting: "Connecting…", open: "Connected", closed: "Disconnected — reconnecting…" };
  document.body.dataset.connection = state.connection;
  $("#connection").textContent = labels[state.connection];
  const player = $("#player-name");
  player.textContent = state.player ? state.player.name : "";
  $("#player-tag").textContent = state.player ? `#${playerTag(state.player.id)}` : "";
  player.dataset.playerId = state.player ? state.player.id : "";
  $("#rename").hidden = state.player === null;
  const message = $("#message");
  message.textContent = state.message ? state.message.text : "";
  message.dataset.kind = state.message ? state.message.kind : "";
  const redrawn = renderBoard(state, now);
  renderMarks(state.selection, state.hint);
  renderGameOver(state);
  renderLists(state, codes);
  return redrawn;
}

/** Draw a board alone (the replay page): its piles, fitted to a phone's screen once redrawn. */
export function drawBoard(board) {
  if (renderPiles(board)) fitBoard(board);
}
