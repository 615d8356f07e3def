// The race screens: the lobby (seats, ready, start, leave, the invitation link), the countdown, the
// others' progress as bars while everyone plays (each seat's own game is the ordinary board, opened
// by `resume` at the reveal), a spectator's small late boards of every seat, and the result with its
// rematch. It owns the race's copy (race.js) and sends the race requests; the app hands it the race
// messages and the connection. The board itself stays the app's.

import {
  applyRaceDiff, boardDelayText, endReason, miniBoard, movesText, myRow, ordinal, raceFromSnapshot, raceLink, raceRefusal,
  rematchOffer, resultTitle, results, secondsUntil, showsBoards, standings, startFrees, startProblem,
} from "./race.js";
import { $, el } from "./render.js";
import { SUITS, cardName, cardText, formatDuration } from "./words.js";

const RACE_KEY = "eightoff.race";  // sessionStorage: {race, code} of this tab's race, followed again after a reload
const TICK_MS = 250;

function storedRace() {
  try { return JSON.parse(sessionStorage.getItem(RACE_KEY) || "null"); } catch { return null; }
}

function storeRace(value) {
  try {
    if (value === null) sessionStorage.removeItem(RACE_KEY); else sessionStorage.setItem(RACE_KEY, JSON.stringify(value));
  } catch { /* storage disabled: a reload loses the race, the link still finds it */ }
}

export class RaceView {
  /**
   * `connection`: connection.js; `player()`: the player or null; `now()`: the server's time in epoch
   * ms or null; `openGame(game)`: show the seat's game on the board (a `resume`); `shownGame()`: the
   * game the board shows; `showTable()`: bring the table forward (a phone's tab); `watchGame(game)`:
   * show another seat's game, once the race is over (before, the server refuses it).
   */
  constructor({ connection, player, now, openGame, shownGame, showTable, watchGame }) {
    Object.assign(this, { connection, player, now, openGame, shownGame, showTable, watchGame });
    this.race = null;       // race.js copy of the followed race, or null
    this.message = null;    // a refusal or a bad link, in player words
    this.drawn = null;
    this.opened = null;     // the seat's game already put on the board
    this.leaveArmed = false;  // Leave was tapped once mid-race: a second tap within 3 s gives the seat up
    this.watchNote = null;  // what to say once a race that could not be joined is watched instead
    this.boards = new Map();  // seat → its latest `race_board` board (a spectator's, or the final ones)
    this.boardsSeen = 0;      // boards received: part of what the panel shows (its redraw key)
  }

  // Session -----------------------------------------------------------------------------------------

  /** After every `welcome`: follow this tab's race again, or the one the page's /r/ link names. */
  welcome() {
    const link = raceLink(location.pathname);
    const stored = storedRace();
    if (this.race) {
      this.request("race_watch", { race: this.race.race });
    } else if (link && link.error) {
      this.message = link.error;
    } else if (link && stored && stored.code === link.code) {
      this.request("race_watch", { race: stored.race });
    } else if (link) {
      this.request("race_join", { code: link.code });
    } else if (stored) {
      this.request("race_watch", { race: stored.race });
    }
    this.render();
  }

  request(type, fields) {
    const reply = this.connection.request(type, fields);
    if (reply === null) this.message = "Not connected to the server; reconnecting…";
    return reply;
  }

  /** A message of the race protocol (or an error answering a race request); true when it was one. */
  handle(message, request) {
    if (message.type === "race") this.follow(message);
    else if (message.type === "race_diff") this.changed(message);
    else if (message.type === "error" && request && request.type.startsWith("race_")) this.refused(request, message);
    else if (message.type === "race_board") this.boarded(message);
    else return false;
    this.render();
    return true;
  }

  /** A seat's board: a spectator's, late; everyone's final ones at the end (a racer sees none before). */
  boarded(message) {
    if (!this.race || message.race !== this.race.race) return;
    this.boards.set(message.seat, message.board);
    this.boardsSeen += 1;
  }

  follow(message) {
    const before = this.race;
    if (before && before.race !== message.race) {
      this.boards.clear();
      // The race this tab left for another (its rematch): stop following the finished one.
      if (before.state === "finished" || before.state === "cancelled") this.request("race_leave", { race: before.race });
    }
    this.race = raceFromSnapshot(message);
    this.message = this.watchNote;
    this.watchNote = null;
    storeRace({ race: this.race.race, code: this.race.code });
    if (location.pathname !== `/r/${this.race.code}`) history.replaceState(null, "", `/r/${this.race.code}`);
    this.openSeatGame();
  }

  changed(diff) {
    if (!this.race) return;
    const result = applyRaceDiff(this.race, diff);
    if (result === "gap") this.request("race_watch", { race: this.race.race });
    if (result === "applied") this.openSeatGame();
  }

  refused(request, error) {
    this.message = raceRefusal(request.type, error);
    if (request.type === "race_join" && error.code === "illegal_move" && !/full/.test(error.message)) {
      // Started or over: a stranger with the link watches it instead, by its code.
      this.watchNote = /started/.test(error.message)
        ? "That race had already started: you are watching it."
        : "That race is over: here is how it ended.";
      this.request("race_watch", { code: request.fields.code });
      return;
    }
    if (error.code === "not_found" && request.type === "race_watch") {
      // The stored race is gone: start again from the link, if the page has one.
      storeRace(null);
      this.race = null;
      const link = raceLink(location.pathname);
      if (link && link.code) {
        this.message = null;
        this.request("race_join", { code: link.code });
      }
    }
  }

  /** From the reveal on, the player's seat has a game: show it on the board (once). */
  openSeatGame() {
    const race = this.race;
    const mine = race && myRow(race, this.player()?.id);
    if (!mine || !mine.game || race.state === "lobby" || race.state === "countdown") return;
    if (this.shownGame() === mine.game || this.opened === mine.game) return;
    this.opened = mine.game;
    this.openGame(mine.game);
    this.showTable();
  }

  // Requests of the interface ----------------------------------------------------------------------

  create(fields) {
    this.message = null;
    this.request("race_create", fields);
    this.showTable();
    this.render();
  }

  join(code) {
    const link = raceLink(`/r/${encodeURIComponent(code)}`);
    if (link.error) {
      this.message = "A race code is 8 letters and digits, like K7M2QX9P.";
    } else {
      this.message = null;
      this.request("race_join", { code: link.code });
      this.showTable();
    }
    this.render();
  }

  /** Close the race panel: leave the seat first while that still means something. */
  async close() {
    const race = this.race;
    const mine = race && myRow(race, this.player()?.id);
    const over = race && (race.state === "finished" || race.state === "cancelled");
    if (race && over) {
      this.request("race_leave", { race: race.race });  // stop following it; nothing to give up, nothing to wait for
    } else if (race && (!over || !mine)) {
      const reply = await this.request("race_leave", { race: race.race });
      if (!reply || reply.type === "error") return;
    }
    this.boards.clear();
    this.race = null;
    this.message = null;
    storeRace(null);
    history.replaceState(null, "", "/");
    this.render();
  }

  act(action) {
    const race = this.race;
    const seated = race && myRow(race, this.player()?.id) !== null;
    if (action === "close" && race && race.state === "running" && seated && !this.leaveArmed) {
      this.leaveArmed = true;
      clearTimeout(this.leaveTimer);
      this.leaveTimer = setTimeout(() => {
        this.leaveArmed = false;
        this.render();
      }, 3000);
      this.render();
      return;
    }
    if (action === "close") {
      this.leaveArmed = false;
      this.close();
      return;
    }
    if (action === "rematch" && race) {
      const offer = rematchOffer(race, this.player()?.id);
      if (offer) {
        this.message = null;
        this.request(offer.type, offer.fields);
        this.showTable();
        this.render();
      }
      return;
    }
    if (!race) return;
    const mine = myRow(race, this.player()?.id);
    if ((action === "ready" || action === "unready") && mine) this.request("race_ready", { race: race.race, ready: action === "ready" });
    if (action === "start") this.request("race_start", { race: race.race });
    if (action === "copy") navigator.clipboard?.writeText(this.link()).catch(() => {});
    this.message = null;
    this.render();
  }

  link() {
    return `${location.origin}/r/${this.race.code}`;
  }

  bind() {
    $("#race").addEventListener("click", (event) => {
      const button = event.target.closest("[data-race-action]");
      if (button) this.act(button.dataset.raceAction);
      const board = event.target.closest("[data-race-board]");
      if (board) this.watchGame(board.dataset.raceBoard);
    });
    $("#race-create-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const form = event.target.elements;
      this.create({
        cells: Number(form.cells.value),
        seats: Number(form.seats.value),
        time_limit: Number(form.time_limit.value),
        public: form.public.checked || undefined,
      });
    });
    $("#race-join-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.join(event.target.elements.code.value.trim());
    });
    setInterval(() => {
      if (this.race && (this.race.state === "countdown" || this.race.state === "running")) this.render();
    }, TICK_MS);
  }

  // Drawing -----------------------------------------------------------------------------------------

  /** Draw the race panel, only when what it shows changed (so that a press keeps its button). */
  render() {
    const race = this.race;
    const playerId = this.player()?.id;
    const clock = race ? this.clockText(race) : null;
    const key = JSON.stringify([race, this.message, playerId, clock, this.leaveArmed, this.boardsSeen]);
    document.body.dataset.race = race ? race.state : "";
    const panel = $("#race");
    panel.hidden = race === null && this.message === null;
    if (key === this.drawn) return;
    this.drawn = key;
    panel.dataset.state = race ? race.state : "none";
    panel.dataset.v = race ? String(race.v) : "";
    const message = el("p", { id: "race-message", role: "alert", text: this.message ?? "" });
    if (!race) {
      panel.replaceChildren(el("h2", { text: "Race" }), message);
      return;
    }
    panel.replaceChildren(this.header(race, clock, playerId), message, ...this.body(race, playerId));
  }

  clockText(race) {
    const now = this.now();
    if (race.state === "countdown") {
      const left = secondsUntil(race.starts_at, now);
      return left === null ? "…" : String(left);
    }
    if (race.state === "running") {
      const left = secondsUntil(race.ends_at, now);
      return left === null ? "–" : formatDuration(left * 1000);
    }
    return null;
  }

  header(race, clock, playerId) {
    const what = `${race.cells} cells · ${formatDuration(race.time_limit * 1000)} · ${race.public ? "public" : "private"}`;
    const titles = { lobby: "Race lobby", countdown: "Get ready", running: "Race", finished: "Race over", cancelled: "Race cancelled" };
    const parts = [el("h2", { text: titles[race.state] ?? "Race" }), el("span", { className: "race-what", text: what })];
    if (race.state === "countdown") parts.push(el("span", { id: "race-countdown", className: "race-clock", text: `Starts in ${clock}` }));
    if (race.state === "running") {
      parts.push(el("span", { id: "race-time-left", className: "race-clock", text: `${clock} left` }));
      const leave = myRow(race, playerId)
        ? { title: "Give up your seat: you rank after everyone still racing", text: this.leaveArmed ? "Really leave?" : "Leave" }
        : { title: "Stop following this race", text: "Stop watching" };  // a spectator gives nothing up
      parts.push(el("button", { type: "button", className: "race-leave", "data-race-action": "close", ...leave }));
    }
    return el("header", { className: "race-head" }, ...parts);
  }

  body(race, playerId) {
    if (race.state === "lobby" || race.state === "countdown") return this.lobby(race, playerId);
    // A race over read back from storage has no final board to send (its places offer "See board").
    const none = race.state === "finished" && this.boards.size === 0;
    const boards = showsBoards(race, playerId) && !none ? [this.spectatorBoards(race, playerId)] : [];
    if (race.state === "running") return [this.bars(race, playerId), ...boards];
    return [...this.result(race, playerId), ...boards];
  }

  /** A spectator's small boards of every seat, late (the note says how late), in seat order. */
  spectatorBoards(race, playerId) {
    const over = race.state === "finished";
    const figures = standings(race, playerId).filter((row) => !over || this.boards.has(row.seat)).map((row) => {
      const board = miniBoard(this.boards.get(row.seat));
      const caption = el("figcaption", {},
        el("span", { className: "race-name", text: row.name }),
        el("span", { className: "race-figures", text: board ? movesText(board.moves) : "no board yet" }));
      return el("figure", { className: "mini-board", "data-seat": String(row.seat), "data-v": board ? String(board.v) : "", "data-status": board ? board.status : "" },
        caption, ...(board ? [this.drawMini(board)] : []));
    });
    return el("section", { id: "race-boards", "aria-label": "The seats' boards" },
      el("p", { id: "race-boards-note", className: "race-note", text: boardDelayText(race) }),
      el("div", { className: "mini-boards" }, ...figures));
  }

  drawMini(board) {
    const card = (text) => text
      ? el("span", { className: `mini-card ${SUITS[text[1]].red ? "red" : "black"}`, title: cardName(text), text: cardText(text) })
      : el("span", { className: "mini-card empty" });
    return el("div", { className: "mini-table", "aria-hidden": "true" },
      el("div", { className: "mini-row" }, ...board.foundations.map((f) => card(f.top)), ...board.cells.map(card)),
      el("div", { className: "mini-columns" }, ...board.tableau.map((column) => el("div", { className: "mini-column" }, ...column.map(card)))));
  }

  lobby(race, playerId) {
    const mine = myRow(race, playerId);
    const rows = standings(race, playerId).map((row) => el(
      "li",
      { "data-seat": String(row.seat), "data-mine": row.mine ? "true" : "false", "data-ready": String(row.ready) },
      el("span", { className: "race-name", text: `${row.name}${row.mine ? " (you)" : ""}${row.creator ? " · creator" : ""}` }),
      el("span", { className: `tag ${row.ready ? "ready" : ""}`, text: row.ready ? "ready" : "not ready" }),
    ));
    for (let seat = race.rows.length; seat < race.seats; seat += 1) rows.push(el("li", { className: "open-seat", text: "open seat" }));
    const parts = [];
    if (race.state === "lobby") {
      parts.push(el("p", { className: "race-invite" },
        el("span", { text: "Invite: " }),
        el("a", { id: "race-link", href: this.link(), text: this.link() }),
        el("span", { text: " · code " }),
        el("strong", { id: "race-code-shown", text: race.code }),
        el("button", { type: "button", className: "link", "data-race-action": "copy", text: "Copy link" })));
    }
    parts.push(el("ul", { id: "race-seats" }, ...rows));
    if (race.state === "lobby" && mine) {
      const problem = startProblem(race);
      const buttons = [[mine.ready ? "unready" : "ready", mine.ready ? "Not ready" : "Ready"]];
      if (race.creator === playerId) buttons.push(["start", "Start"]);
      buttons.push(["close", "Leave"]);
      const bar = this.buttons(buttons);
      const start = bar.querySelector('[data-race-action="start"]');
      if (start) {
        start.disabled = problem !== null;
        start.title = problem ?? "Start the countdown";
      }
      parts.push(bar);
      const frees = startFrees(race);
      if (problem && race.creator === playerId) parts.push(el("p", { className: "race-note", text: problem }));
      else if (race.creator === playerId && frees.length) parts.push(el("p", { className: "race-note", text: `Starting now frees the seats not ready: ${frees.join(", ")}.` }));
      if (race.creator !== playerId) parts.push(el("p", { className: "race-note", text: "The creator starts the race; a seat not ready then is freed." }));
    }
    return parts;
  }

  bars(race, playerId) {
    return el("ol", { id: "race-bars", "aria-label": "Standings" }, ...standings(race, playerId).map((row) => {
      return el(
        "li",
        { "data-seat": String(row.seat), "data-mine": row.mine ? "true" : "false", "data-status": row.status, "data-cards": String(row.cardsHome), "data-moves": String(row.moves) },
        el("span", { className: "race-name", text: row.mine ? `${row.name} (you)` : row.name }),
        el("span", { className: "race-bar", role: "progressbar", "aria-valuemin": "0", "aria-valuemax": "52", "aria-valuenow": String(row.cardsHome) },
          el("span", { className: "race-fill", style: `width: ${(row.progress * 100).toFixed(1)}%` })),
        this.figures(row, true),
        el("span", { className: `tag status-${row.status}`, text: row.statusText }),
      );
    }));
  }

  result(race, playerId) {
    const rows = results(race, playerId).map((row) => el(
      "li",
      { "data-seat": String(row.seat), "data-mine": row.mine ? "true" : "false", "data-place": String(row.place), "data-status": row.status },
      el("span", { className: "race-place", text: ordinal(row.place) }),
      el("span", { className: "race-name", text: row.mine ? `${row.name} (you)` : row.name }),
      this.figures(row, false),
      el("span", { className: `tag status-${row.status}`, text: row.statusText }),
      ...(row.game && !row.mine && race.state === "finished"
        ? [el("button", { type: "button", className: "link", "data-race-board": row.game, text: "See board" })] : []),
      ...(row.rating ? [el("span", { className: `race-rating ${row.rating.delta >= 0 ? "up" : "down"}`, title: `rating ${row.rating.before} → ${row.rating.after}`, text: row.rating.text })] : []),
    ));
    const offer = rematchOffer(race, playerId);
    const buttons = [["close", "Close"]];
    if (offer) buttons.unshift(["rematch", offer.label]);
    let note = null;
    if (offer && race.rematch) note = "A rematch was asked: same settings, a new deal.";
    else if (offer) note = "Rematch: the same settings and a new deal; your rivals are offered to join it.";
    return [
      el("p", { id: "race-result", className: "race-result", text: resultTitle(race, playerId) }),
      el("p", { className: "race-note", text: endReason(race) }),
      el("ol", { id: "race-places" }, ...rows),
      this.buttons(buttons),
      ...(note ? [el("p", { id: "race-rematch-note", className: "race-note", text: note })] : []),
    ];
  }

  /** A seat's figures; the score and the time of its last action give way on a phone. */
  figures(row, withScore) {
    const extra = `${withScore ? ` · ${row.score} pts` : ""} · ${formatDuration(row.timeMs)}`;
    return el("span", { className: "race-figures", title: "cards home · moves · score · time of the last move" },
      `${row.cardsHome}/52 home · ${movesText(row.moves)}`,
      el("span", { className: "race-extra", text: extra }));
  }

  buttons(list) {
    return el("div", { className: "race-buttons" }, ...list.map(([action, label]) =>
      el("button", { type: "button", "data-race-action": action, className: ["start", "ready", "rematch"].includes(action) ? "primary" : "", text: label })));
  }
}
