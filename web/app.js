// Eight Off browser client: plain JavaScript, no build step.
//
// Three parts, top to bottom:
//   1. Connection: the WebSocket speaking eightoff.v1.json (protocol/README.md), hello with the
//      stored token, reconnection.
//   2. State: the client's model (player, own unfinished games, live games, the board copied from a
//      snapshot and kept up to date by applying the ops of ack/diff without knowing any rule), and the
//      handlers of every server message.
//   3. Render and input: DOM drawing from the state, clicks and keys turned into requests.
// The server is authoritative: the client never decides whether a move is legal.

const SUBPROTOCOL = "eightoff.v1.json";
const TOKEN_KEY = "eightoff.token";          // localStorage: the player survives reloads
const CURRENT_KEY = "eightoff.current";      // sessionStorage: this tab's game, resumed after a reload
const CODES_KEY = "eightoff.codes";          // localStorage: game id -> code, to label unfinished games
const LIVE_REFRESH_MS = 10000;
const LEADERBOARD_LIMIT = 10;                // rows per leaderboard page ("More" asks for the next)

// ---------------------------------------------------------------------------------------------------
// 1. Connection
// ---------------------------------------------------------------------------------------------------

class Connection {
  constructor(onMessage, onStatus) {
    this.onMessage = onMessage;
    this.onStatus = onStatus;
    this.ws = null;
    this.nextId = 1;
    this.pending = new Map();   // request id -> {type, fields}: tells what a reply or error answers
    this.retryDelay = 500;
  }

  url() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    return `${scheme}//${location.host}/ws`;
  }

  connect() {
    this.onStatus("connecting");
    const ws = new WebSocket(this.url(), [SUBPROTOCOL]);
    this.ws = ws;
    ws.addEventListener("open", () => {
      this.retryDelay = 500;
      this.onStatus("open");
    });
    ws.addEventListener("message", (event) => {
      let message;
      try {
        message = JSON.parse(event.data);
      } catch {
        return;  // the server only sends JSON text frames on this subprotocol
      }
      const request = "id" in message ? this.pending.get(message.id) : undefined;
      this.onMessage(message, request);
    });
    ws.addEventListener("close", () => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.pending.clear();
      this.onStatus("closed");
      setTimeout(() => this.connect(), this.retryDelay);
      this.retryDelay = Math.min(this.retryDelay * 2, 10000);
    });
  }

  get isOpen() {
    return this.ws !== null && this.ws.readyState === WebSocket.OPEN;
  }

  /** Send a request with a fresh id; optional fields that are undefined are left out (never null). */
  send(type, fields = {}) {
    if (!this.isOpen) return null;
    const id = this.nextId++;
    const message = { type, id };
    for (const [key, value] of Object.entries(fields)) {
      if (value !== undefined && value !== null) message[key] = value;
    }
    this.pending.set(id, { type, fields });
    this.ws.send(JSON.stringify(message));
    return id;
  }

  /** Replies come in request order; a request is settled once its final reply arrived. */
  settle(id) {
    this.pending.delete(id);
  }
}

// ---------------------------------------------------------------------------------------------------
// 2. State
// ---------------------------------------------------------------------------------------------------

const state = {
  connection: "connecting",  // connecting | open | closed
  player: null,              // {id, name}
  myGames: [],               // ids of the player's unfinished games
  live: [],                  // rows of the last `live` reply
  mode: null,                // "play" | "watch" | null
  board: null,               // copy of the shown game (see boardFromSnapshot)
  selection: null,           // {pile, n}: the source picked by a click
  over: null,                // {won, score, moves, duration_ms} once the shown game ended
  message: null,             // {kind: "error" | "info", text}
  leaderboard: {
    query: null,             // the fields of the board shown (board, cells, code, date, period, order)
    rows: [],                // its rows so far (pages appended by "More")
    next: null,              // the cursor of the next page, if any
    around: false,           // the rows are the page around the player's own row
    pending: null,           // {id, query, append, around}: the page awaited; older replies are dropped
    error: null,             // the server's message refusing the last request
  },
  profile: null,             // the player's own last `profile` reply
  profileError: null,
};

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

function boardFromSnapshot(s) {
  return {
    game: s.game,
    v: s.v,
    code: s.code,
    player: s.player,
    tableau: s.tableau.map((column) => [...column]),
    cells: [...s.cells],
    foundations: { ...s.foundations },
    score: s.score,
    moves: s.moves,
    status: s.status,
  };
}

/** Take `op.cards` off `op.from` and put them on `op.to` (protocol README section 7). */
function applyOp(board, op) {
  const count = op.cards.length;
  const from = op.from;
  const to = op.to;
  if (from[0] === "t") board.tableau[Number(from.slice(1)) - 1].splice(-count, count);
  else if (from[0] === "c") board.cells[Number(from.slice(1)) - 1] = null;
  else if (from[0] === "f") board.foundations[from.slice(1)] = op.top ?? null;
  if (to[0] === "t") board.tableau[Number(to.slice(1)) - 1].push(...op.cards);
  else if (to[0] === "c") board.cells[Number(to.slice(1)) - 1] = op.cards[0];
  else if (to[0] === "f") board.foundations[to.slice(1)] = op.cards[count - 1];
}

/** Apply an ack or diff: "applied", "old" (already seen) or "gap" (a version was missed). */
function applyChange(board, message) {
  if (message.v <= board.v) return "old";
  if (message.v !== board.v + 1) return "gap";
  for (const op of message.ops) applyOp(board, op);
  board.v = message.v;
  board.score = message.score;
  board.moves = message.moves;
  board.status = message.status;
  return "applied";
}

function addMyGame(game) {
  if (!state.myGames.includes(game)) state.myGames = [game, ...state.myGames];
}

function dropMyGame(game) {
  state.myGames = state.myGames.filter((id) => id !== game);
}

function say(kind, text) {
  state.message = text ? { kind, text } : null;
}

const conn = new Connection(handleMessage, handleStatus);

function handleStatus(status) {
  state.connection = status;
  if (status === "closed") state.leaderboard.pending = null;  // its reply will never come
  if (status === "open") {
    const token = storageGet(localStorage, TOKEN_KEY);
    conn.send("hello", { protocol: 1, token: token || undefined });
  }
  render();
}

function handleMessage(message, request) {
  const handler = HANDLERS[message.type];
  if (handler) handler(message, request);  // unknown types are ignored (protocol README section 12)
  if ("id" in message) conn.settle(message.id);
  render();
}

/** Ask for a fresh snapshot of the shown game: resume one's own, watch anyone's. */
function resync() {
  if (!state.board) return;
  conn.send(state.mode === "watch" ? "watch" : "resume", { game: state.board.game });
}

const HANDLERS = {
  welcome(message) {
    state.player = message.player;
    if (message.token) storageSet(localStorage, TOKEN_KEY, message.token);
    state.myGames = [...message.games];
    if (state.board) {
      resync();  // after a reconnect: pick the shown game up again
    } else {
      const current = storageGet(sessionStorage, CURRENT_KEY);
      if (current && state.myGames.includes(current)) conn.send("resume", { game: current });
    }
    requestLive();
    if (leaderboardsOpen()) refreshLeaderboards();
  },

  snapshot(message, request) {
    const previous = state.board;
    const mode = request && request.type === "watch" ? "watch" : request ? "play" : state.mode;
    if (previous && (previous.game !== message.game || mode !== state.mode)) {
      // Leave the board we stop showing, watched or our own: its diffs are no use any more, and
      // the server limits how many games one connection follows.
      conn.send("unwatch", { game: previous.game });
    }
    state.mode = mode;
    state.board = boardFromSnapshot(message);
    state.selection = null;
    state.over = null;
    if (message.status !== "playing") {
      state.over = { won: message.status === "won", score: message.score, moves: message.moves };
    }
    if (mode === "play") {
      rememberCode(message.game, message.code);
      storageSet(sessionStorage, CURRENT_KEY, message.status === "playing" ? message.game : null);
      if (message.status === "playing") addMyGame(message.game); else dropMyGame(message.game);
    }
    if (request && (request.type === "new_game" || request.type === "resume" || request.type === "watch")) {
      say(null, null);
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
    if (result === "applied" && message.status !== "playing") dropMyGame(message.game);
  },

  game_over(message) {
    dropMyGame(message.game);
    const board = state.board;
    if (!board || board.game !== message.game) return;
    state.over = message;
    if (board.status === "playing") board.status = message.won ? "won" : "resigned";
    state.selection = null;
    if (state.mode === "play") {
      storageSet(sessionStorage, CURRENT_KEY, null);
      if (leaderboardsOpen()) refreshLeaderboards();  // the finished game now counts
    }
    requestLive();
  },

  leaderboard(message) {
    const lb = state.leaderboard;
    if (!lb.pending || lb.pending.id !== message.id) return;  // superseded by a newer request
    const { query, append, around } = lb.pending;
    lb.pending = null;
    lb.error = null;
    lb.query = query;
    lb.rows = append ? [...lb.rows, ...message.rows] : message.rows;
    lb.next = message.next ?? null;
    lb.around = append ? lb.around : around;
  },

  profile(message) {
    if (state.player && message.player.id !== state.player.id) return;
    state.profile = message;
    state.profileError = null;
  },

  live(message) {
    state.live = message.games;
  },

  ok() {},

  error(message, request) {
    if (request && request.type === "hello" && message.code === "unauthorized") {
      // The stored token is unknown to this server (a new database): start over as a new guest.
      storageSet(localStorage, TOKEN_KEY, null);
      conn.send("hello", { protocol: 1 });
      return;
    }
    if (request && request.type === "leaderboard") {
      const lb = state.leaderboard;
      if (!lb.pending || lb.pending.id !== message.id) return;
      if (!lb.pending.append) {
        lb.query = null;  // the rows shown no longer answer the form
        lb.rows = [];
        lb.next = null;
      }
      lb.pending = null;
      lb.error = message.message;
      return;
    }
    if (request && request.type === "profile") {
      state.profileError = message.message;
      return;
    }
    if (request && message.code === "stale") {
      say("info", "The board was out of date; it has been refreshed.");
      resync();
      return;
    }
    if (request && (request.type === "resume" || request.type === "watch") && message.code === "not_found") {
      dropMyGame(request.fields.game);
    }
    say("error", message.message);
  },
};

// Requests the interface sends -----------------------------------------------------------------------

function requestLive() {
  conn.send("live", { limit: 20 });
}

function act(type, fields) {
  const board = state.board;
  if (!board || state.mode !== "play") return;
  say(null, null);
  state.selection = null;
  if (conn.send(type, { game: board.game, v: board.v, ...fields }) === null) {
    say("error", "Not connected to the server; reconnecting…");
  }
  render();
}

function sendMove(from, to, n) {
  act("move", { from, to: to[0] === "f" ? "f" : to, n: n > 1 ? n : undefined });
}

function sendTap(from) {
  act("tap", { from });
}

function sendAuto(from, n) {
  act("auto", { from, n: n > 1 ? n : undefined });
}

function newGame(deal, code, cells) {
  say(null, null);
  if (deal === "code") {
    if (!code.trim()) {
      say("error", "Type a game code such as EO1-C8-AAAAAFA.");
      render();
      return;
    }
    conn.send("new_game", { code: code.trim() });
  } else {
    conn.send("new_game", { cells, daily: deal === "daily" ? true : undefined });
  }
}

// Leaderboards and profile --------------------------------------------------------------------------

function leaderboardsOpen() {
  return $("#leaderboards").open;
}

/** The fields of a `leaderboard` request from the form: only those that belong to the board. */
function leaderboardQuery() {
  const form = $("#leaderboard-form").elements;
  const board = form.board.value;
  const query = { board };
  if (board === "daily" || board === "variant") query.cells = Number(form.cells.value);
  if (board === "deal") query.code = form.code.value.trim() || undefined;  // the server says it is required
  if (board === "daily") query.date = form.date.value || undefined;       // default: today (UTC)
  if (board !== "daily") query.period = form.period.value;
  query.order = form.order.value;
  return query;
}

/** Ask for a page: the first one of `query`, the next one (`after`), or the one around a player. */
function requestLeaderboard(query, { after, around } = {}) {
  const lb = state.leaderboard;
  const id = conn.send("leaderboard", { ...query, limit: LEADERBOARD_LIMIT, after, around });
  if (id === null) {
    lb.error = "Not connected to the server; reconnecting…";
  } else {
    lb.pending = { id, query, append: after !== undefined, around: around !== undefined };
    lb.error = null;
  }
  render();
}

function requestProfile() {
  conn.send("profile");  // no `player`: one's own
}

/** The board the form describes, from its first page, and the profile with it. */
function refreshLeaderboards() {
  requestProfile();
  requestLeaderboard(leaderboardQuery());
}

function leaderboardMore() {
  const lb = state.leaderboard;
  if (lb.query && lb.next) requestLeaderboard(lb.query, { after: lb.next });
}

function leaderboardAroundMe() {
  if (state.player) requestLeaderboard(leaderboardQuery(), { around: state.player.id });
}

function leaveWatch() {
  if (state.mode === "watch" && state.board) conn.send("unwatch", { game: state.board.game });
}

// ---------------------------------------------------------------------------------------------------
// 3. Render and input
// ---------------------------------------------------------------------------------------------------

const SUITS = {
  S: { symbol: "♠", name: "spades", red: false },
  H: { symbol: "♥", name: "hearts", red: true },
  D: { symbol: "♦", name: "diamonds", red: true },
  C: { symbol: "♣", name: "clubs", red: false },
};
const RANKS = { A: "A", T: "10", J: "J", Q: "Q", K: "K" };
const RANK_NAMES = { A: "ace", T: "10", J: "jack", Q: "queen", K: "king" };
const FOUNDATIONS = ["S", "H", "D", "C"];

const $ = (selector) => document.querySelector(selector);

function el(tag, attributes = {}, ...children) {
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

function cardElement(card, extra = {}) {
  const rank = RANKS[card[0]] ?? card[0];
  const suit = SUITS[card[1]];
  return el(
    "button",
    {
      type: "button",
      className: `card ${suit.red ? "red" : "black"}`,
      "data-card": card,
      "aria-label": `${RANK_NAMES[card[0]] ?? rank} of ${suit.name}`,
      ...extra,
    },
    el("span", { className: "corner", "aria-hidden": "true", text: `${rank}${suit.symbol}` }),
    el("span", { className: "pip", "aria-hidden": "true", text: suit.symbol }),
  );
}

function pileElement(pile, label, cards, placeholder = "") {
  const node = el("div", { className: `pile pile-${pile[0]}`, "data-pile": pile, role: "group", "aria-label": label });
  if (cards.length === 0) node.append(el("span", { className: "placeholder", "aria-hidden": "true", text: placeholder }));
  cards.forEach((card, index) => node.append(cardElement(card, { "data-index": String(index) })));
  return node;
}

/** Redraw the piles (only when the board changed, so that clicks land on stable elements). */
let drawnBoard = null;

function renderPiles(board) {
  const key = JSON.stringify([board.game, board.v, board.tableau, board.cells, board.foundations]);
  if (key === drawnBoard) return;
  drawnBoard = key;
  $("#foundations").replaceChildren(
    ...FOUNDATIONS.map((suit) => {
      const top = board.foundations[suit];
      return pileElement(`f${suit}`, `Foundation ${SUITS[suit].name}`, top ? [top] : [], SUITS[suit].symbol);
    }),
  );
  const cells = $("#cells");
  cells.style.setProperty("--count", String(board.cells.length));
  cells.replaceChildren(
    ...board.cells.map((card, i) => pileElement(`c${i + 1}`, `Cell ${i + 1}`, card ? [card] : [])),
  );
  $("#tableau").replaceChildren(
    ...board.tableau.map((column, i) => pileElement(`t${i + 1}`, `Column ${i + 1}`, column, "K")),
  );
}

function renderSelection() {
  for (const node of document.querySelectorAll(".selected, .source")) node.classList.remove("selected", "source");
  const selection = state.selection;
  if (!selection) return;
  const pile = document.querySelector(`[data-pile="${selection.pile}"]`);
  if (!pile) return;
  pile.classList.add("source");
  const cards = [...pile.querySelectorAll("[data-card]")];
  for (const card of cards.slice(cards.length - selection.n)) card.classList.add("selected");
}

function renderBoard() {
  const board = state.board;
  const boardNode = $("#board");
  $("#empty-hint").hidden = board !== null;
  boardNode.hidden = board === null;
  $("#game-info").hidden = board === null;
  $("#toolbar").hidden = board === null;
  if (!board) {
    drawnBoard = null;
    return;
  }
  boardNode.dataset.mode = state.mode ?? "";
  boardNode.dataset.game = board.game;
  boardNode.dataset.v = String(board.v);
  boardNode.dataset.status = board.status;
  const fields = {
    code: board.code,
    score: board.score,
    moves: board.moves,
    v: board.v,
    status: board.status,
    owner: state.mode === "watch" ? `${board.player.name} (watching)` : board.player.name,
  };
  for (const [name, value] of Object.entries(fields)) {
    document.querySelector(`#game-info [data-field="${name}"]`).textContent = String(value);
  }
  const playing = state.mode === "play" && board.status === "playing";
  $("#undo").disabled = !playing;
  $("#tap").disabled = !playing;
  $("#resign").disabled = !playing;
  $("#undo").hidden = $("#tap").hidden = $("#resign").hidden = state.mode === "watch";
  $("#unwatch").hidden = state.mode !== "watch";
  renderPiles(board);
  renderSelection();

  const over = $("#game-over");
  over.hidden = state.over === null;
  if (state.over) {
    const seconds = state.over.duration_ms !== undefined ? `, ${Math.round(state.over.duration_ms / 1000)} s` : "";
    over.textContent = state.over.won
      ? `Won! Score ${state.over.score} in ${state.over.moves} moves${seconds}.`
      : `Game over (resigned). Score ${state.over.score}, ${state.over.moves} moves${seconds}.`;
    over.dataset.won = String(Boolean(state.over.won));
  }
}

const GAME_ORDERS = [["moves", "Fewest moves"], ["time", "Fastest"], ["score", "Score (farmable)"]];
const PLAYER_ORDERS = [["wins", "Most wins"], ["score", "Best score (farmable)"]];
const BOARD_NAMES = { daily: "Daily deal", variant: "Variant", deal: "Deal", players: "Players" };
const PERIOD_NAMES = { day: "today", week: "this week", all: "all time" };

/** Show the fields that belong to the chosen board, with its orders (keeping the order if it fits). */
function syncLeaderboardForm() {
  const form = $("#leaderboard-form");
  const board = form.elements.board.value;
  for (const label of form.querySelectorAll("[data-applies]")) {
    label.hidden = !label.dataset.applies.split(" ").includes(board);
  }
  const select = form.elements.order;
  const orders = board === "players" ? PLAYER_ORDERS : GAME_ORDERS;
  const keep = orders.some(([value]) => value === select.value) ? select.value : orders[0][0];
  if (select.dataset.kind !== (board === "players" ? "players" : "games")) {
    select.dataset.kind = board === "players" ? "players" : "games";
    select.replaceChildren(...orders.map(([value, text]) => el("option", { value, text })));
  }
  select.value = keep;
  $("#score-note").hidden = select.value !== "score";
}

let boardCodeEdited = false;  // the deal board's code follows the shown game until the player types one

function formatDuration(ms) {
  const seconds = Math.floor(ms / 1000);
  return `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, "0")}`;
}

function formatRate(rate) {
  return `${Math.round(rate * 1000) / 10}%`;
}

function describeQuery(query) {
  const parts = [BOARD_NAMES[query.board]];
  if (query.board === "deal") parts.push(query.code);
  if (query.board === "daily") parts.push(query.date ?? "today");
  if (query.cells) parts.push(`${query.cells} cells`);
  if (query.period) parts.push(PERIOD_NAMES[query.period]);
  const orders = query.board === "players" ? PLAYER_ORDERS : GAME_ORDERS;
  parts.push(`by ${(orders.find(([value]) => value === query.order) ?? [query.order, query.order])[1].toLowerCase()}`);
  return parts.join(" · ");
}

let drawnLeaderboard = null;

function renderLeaderboard() {
  const lb = state.leaderboard;
  const me = state.player ? state.player.id : null;
  if (!boardCodeEdited && state.board && $("#board-code").value !== state.board.code) {
    $("#board-code").value = state.board.code;
  }
  $("#leaderboard-around").disabled = !me;
  const error = $("#leaderboard-error");
  error.hidden = !lb.error;
  error.textContent = lb.error ?? "";
  const more = $("#leaderboard-more");
  more.hidden = !(lb.query && lb.next);
  more.disabled = lb.pending !== null;
  const table = $("#leaderboard-table");
  table.dataset.state = lb.pending ? "loading" : lb.query ? "loaded" : "empty";
  table.dataset.board = lb.query ? lb.query.board : "";

  const key = JSON.stringify([lb.query, lb.rows, lb.around, me]);
  if (key !== drawnLeaderboard) {
    drawnLeaderboard = key;
    const query = lb.query;
    const players = query !== null && query.board === "players";
    const heads = players ? ["#", "Player", "Played", "Won", "Win %"] : ["#", "Player", "Moves", "Time", "Score", "Won"];
    table.hidden = !query || lb.rows.length === 0;
    const caption = table.createCaption();
    caption.textContent = query ? describeQuery(query) : "";
    table.tHead.replaceChildren(el("tr", {}, ...heads.map((text) => el("th", { scope: "col", text }))));
    table.tBodies[0].replaceChildren(
      ...lb.rows.map((row) => {
        const mine = row.player.id === me;
        const cell = (col, text, title) => el("td", { "data-col": col, text: String(text), title });
        const figures = players
          ? [cell("played", row.played), cell("won", row.won), cell("win_rate", formatRate(row.win_rate))]
          : [
            cell("moves", row.moves),
            cell("time", formatDuration(row.duration_ms)),
            cell("score", row.score),
            cell("won", row.won ? "✓" : "✗", row.won ? "won" : "resigned"),
          ];
        return el(
          "tr",
          {
            "data-rank": String(row.rank),
            "data-player-id": row.player.id,
            "data-won": players ? undefined : String(row.won),
            "aria-current": mine ? "true" : undefined,
            className: mine ? "mine" : "",
            title: players ? undefined : row.code,
          },
          cell("rank", row.rank),
          cell("player", mine ? `${row.player.name} (you)` : row.player.name),
          ...figures,
        );
      }),
    );
    const empty = $("#leaderboard-empty");
    empty.hidden = !query || lb.rows.length > 0;
    empty.textContent = lb.around
      ? "You have no row on this board yet."
      : players ? "No finished games in this period yet." : "No finished games on this board yet.";
  }

  const profile = state.profile;
  const box = $("#profile");
  box.dataset.loaded = String(profile !== null);
  const values = profile
    ? {
      played: profile.played,
      won: profile.won,
      win_rate: formatRate(profile.win_rate),
      streak: `${profile.streak.current} (best ${profile.streak.best})`,
    }
    : { played: "–", won: "–", win_rate: "–", streak: "–" };
  for (const [name, value] of Object.entries(values)) {
    box.querySelector(`[data-field="${name}"]`).textContent = String(value);
  }
  const streak = box.querySelector('[data-field="streak"]');
  streak.dataset.current = profile ? String(profile.streak.current) : "";
  streak.dataset.best = profile ? String(profile.streak.best) : "";
  const profileError = $("#profile-error");
  profileError.hidden = !state.profileError;
  profileError.textContent = state.profileError ?? "";
}

function renderLists() {
  const codes = knownCodes();
  const current = state.board && state.mode === "play" ? state.board.game : null;
  $("#my-games").replaceChildren(
    ...(state.myGames.length === 0
      ? [el("li", { className: "none", text: "None." })]
      : state.myGames.map((game) =>
        el(
          "li",
          { "data-my-game": game },
          el("span", { text: codes[game] ?? game }),
          game === current
            ? el("span", { className: "tag", text: "open" })
            : el("button", { type: "button", "data-resume": game, text: "Resume" }),
        ),
      )),
  );
  const watched = state.board && state.mode === "watch" ? state.board.game : null;
  $("#live-games").replaceChildren(
    ...(state.live.length === 0
      ? [el("li", { className: "none", text: "Nobody is playing right now." })]
      : state.live.map((row) => {
        const mine = state.player && row.player.id === state.player.id;
        return el(
          "li",
          { "data-live-game": row.game },
          el("span", { className: "who", text: `${row.player.name}${mine ? " (you)" : ""}` }),
          el("span", { className: "what", text: `${row.code} · ${row.moves} moves · ${row.score} pts · ${row.watchers} watching` }),
          row.game === watched
            ? el("span", { className: "tag", text: "watching" })
            : el("button", { type: "button", "data-watch": row.game, text: "Watch" }),
        );
      })),
  );
}

function render() {
  const labels = { connecting: "Connecting…", open: "Connected", closed: "Disconnected — reconnecting…" };
  document.body.dataset.connection = state.connection;
  $("#connection").textContent = labels[state.connection];
  const player = $("#player");
  player.textContent = state.player ? `Playing as ${state.player.name}` : "";
  player.dataset.playerId = state.player ? state.player.id : "";
  const message = $("#message");
  message.textContent = state.message ? state.message.text : "";
  message.dataset.kind = state.message ? state.message.kind : "";
  renderBoard();
  renderLists();
  renderLeaderboard();
}

// Input -----------------------------------------------------------------------------------------------

/** How many cards a click on `cardNode` picks: itself and every card above it in its pile. */
function runLength(pileNode, cardNode) {
  const cards = pileNode.querySelectorAll("[data-card]");
  return cards.length - Number(cardNode.dataset.index ?? cards.length - 1);
}

let clickMoved = false;  // the first click of a double-click sent a move: the double-click is not an auto

function onBoardClick(event) {
  const board = state.board;
  if (!board || state.mode !== "play" || board.status !== "playing") return;
  if (event.detail > 1) return;  // the second click of a double-click: the dblclick handler decides
  const pileNode = event.target.closest("[data-pile]");
  if (!pileNode) return;
  const pile = pileNode.dataset.pile;
  const cardNode = event.target.closest("[data-card]");
  const selection = state.selection;
  clickMoved = false;
  if (selection && selection.pile !== pile) {
    clickMoved = true;
    sendMove(selection.pile, pile, selection.n);
    return;
  }
  if (!cardNode) {
    state.selection = null;
  } else {
    const n = runLength(pileNode, cardNode);
    state.selection = selection && selection.n === n ? null : { pile, n };
  }
  renderSelection();
}

function onBoardDoubleClick(event) {
  const board = state.board;
  if (!board || state.mode !== "play" || board.status !== "playing" || clickMoved) return;
  const pileNode = event.target.closest("[data-pile]");
  const cardNode = event.target.closest("[data-card]");
  if (!pileNode || !cardNode) return;
  const pile = pileNode.dataset.pile;
  if (pile[0] === "f") return;
  sendAuto(pile, pile[0] === "t" ? runLength(pileNode, cardNode) : 1);
}

function onKey(event) {
  if (event.target.closest("input, select, textarea")) return;
  if (event.key === "Escape" && state.selection) {
    state.selection = null;
    renderSelection();
  } else if (event.key === "u" && !event.ctrlKey && !event.metaKey) {
    act("undo", {});
  } else if (event.key === "f" && !event.ctrlKey && !event.metaKey) {
    tapSelection();
  }
}

function tapSelection() {
  const selection = state.selection;
  if (!selection) {
    say("info", "Select a card first, then send it to its foundation.");
    render();
  } else if (selection.n !== 1 || selection.pile[0] === "f") {
    say("error", "Only a single top card of a column or a cell can go to a foundation.");
    state.selection = null;
    render();
  } else {
    sendTap(selection.pile);
  }
}

let resignArmed = null;

function onResign() {
  const button = $("#resign");
  if (resignArmed === null) {
    button.textContent = "Really resign?";
    resignArmed = setTimeout(() => {
      resignArmed = null;
      button.textContent = "Resign";
    }, 3000);
    return;
  }
  clearTimeout(resignArmed);
  resignArmed = null;
  button.textContent = "Resign";
  if (state.board && state.mode === "play") conn.send("resign", { game: state.board.game });
}

function bind() {
  const boardNode = $("#board");
  boardNode.addEventListener("click", onBoardClick);
  boardNode.addEventListener("dblclick", onBoardDoubleClick);
  document.addEventListener("keydown", onKey);
  $("#undo").addEventListener("click", () => act("undo", {}));
  $("#tap").addEventListener("click", tapSelection);
  $("#resign").addEventListener("click", onResign);
  $("#unwatch").addEventListener("click", () => {
    leaveWatch();
    state.board = null;
    state.mode = null;
    state.over = null;
    render();
  });
  $("#refresh-live").addEventListener("click", requestLive);
  $("#new-game-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    newGame(form.elements.deal.value, form.elements.code.value, Number(form.elements.cells.value));
  });
  $("#code").addEventListener("input", () => {
    $("#new-game-form").elements.deal.value = "code";
  });
  $("#my-games").addEventListener("click", (event) => {
    const button = event.target.closest("[data-resume]");
    if (button) conn.send("resume", { game: button.dataset.resume });
  });
  $("#live-games").addEventListener("click", (event) => {
    const button = event.target.closest("[data-watch]");
    if (button) conn.send("watch", { game: button.dataset.watch });
  });
  const leaderboardForm = $("#leaderboard-form");
  $("#leaderboards").addEventListener("toggle", () => {
    if (leaderboardsOpen()) refreshLeaderboards();
  });
  leaderboardForm.addEventListener("submit", (event) => {
    event.preventDefault();
    refreshLeaderboards();
  });
  leaderboardForm.addEventListener("change", (event) => {
    if (event.target.id === "board-code") return;  // a typed code is sent with Show (or Enter)
    syncLeaderboardForm();
    requestLeaderboard(leaderboardQuery());
  });
  $("#board-code").addEventListener("input", () => {
    boardCodeEdited = $("#board-code").value.trim() !== "";
  });
  $("#leaderboard-more").addEventListener("click", leaderboardMore);
  $("#leaderboard-around").addEventListener("click", leaderboardAroundMe);
  syncLeaderboardForm();
  setInterval(() => {
    if (conn.isOpen && state.player && document.visibilityState === "visible") requestLive();
  }, LIVE_REFRESH_MS);
}

bind();
render();
conn.connect();
