// Leaderboards and profiles: the panel's form, its pages of rows, and the profile of whichever player
// a row opens (one's own by default). It owns its state; the app hands it the connection and player.

import { $, el } from "./render.js";
import { playerLabel } from "./names.js";
import { formatDuration } from "./words.js";

const LEADERBOARD_LIMIT = 10;   // rows per page ("More" asks for the next)
const GAME_ORDERS = [["moves", "Fewest moves"], ["time", "Fastest"], ["score", "Score (farmable)"]];
const PLAYER_ORDERS = [["wins", "Most wins"], ["score", "Best score (farmable)"]];
const RATING_ORDERS = [["rating", "Rating"]];
const BOARD_NAMES = { daily: "Daily deal", variant: "Variant", deal: "Deal", players: "Players", rating: "Race ratings" };

/** The orders of a board, and the kind of its rows. */
function ordersOf(board) {
  if (board === "players") return [PLAYER_ORDERS, "players"];
  if (board === "rating") return [RATING_ORDERS, "rating"];
  return [GAME_ORDERS, "games"];
}
const PERIOD_NAMES = { day: "today", week: "this week", all: "all time" };

function formatRate(rate) {
  return `${Math.round(rate * 1000) / 10}%`;
}

function describeQuery(query) {
  const parts = [BOARD_NAMES[query.board]];
  if (query.board === "deal") parts.push(query.code);
  if (query.board === "daily") parts.push(query.date ?? "today");
  if (query.cells) parts.push(`${query.cells} cells`);
  if (query.period) parts.push(PERIOD_NAMES[query.period]);
  const [orders] = ordersOf(query.board);
  parts.push(`by ${(orders.find(([value]) => value === query.order) ?? [query.order, query.order])[1].toLowerCase()}`);
  return parts.join(" · ");
}

/** A profile's race ratings, one per variant raced rated: "C8 1312 (9 races) · C4 1000 (1 race)". */
function formatRatings(ratings) {
  if (ratings.length === 0) return "not rated yet";
  return ratings
    .map(({ cells, rating, races }) => `C${cells} ${rating} (${races} race${races === 1 ? "" : "s"})`)
    .join(" · ");
}

const FINISHED = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });

/** A link to a game's page (/g/ID): its replay, move by move. */
function replayLink(game) {
  return el("a", { href: `/g/${encodeURIComponent(game)}`, "data-replay": game, text: "Replay" });
}

/** One game of a profile (`{game, code, cells, won, score, moves, duration_ms, finished_at}`) as a row. */
function gameRow(game, first) {
  const cell = (col, text, title) => el("td", { "data-col": col, text: String(text), title });
  return el(
    "tr",
    { "data-game": game.game, "data-code": game.code, "data-won": String(game.won) },
    first,
    cell("code", game.code),
    cell("moves", game.moves),
    cell("time", formatDuration(game.duration_ms)),
    ...(first.dataset.col === "cells"
      ? [cell("score", game.score)]
      : [cell("finished", FINISHED.format(new Date(game.finished_at)), game.finished_at)]),
    el("td", {}, el("button", { type: "button", "data-play-code": game.code, text: "Play this deal" }), " ", replayLink(game.game)),
  );
}

/** The profile's best game of each variant and its recent games, as the `profile` reply lists them. */
function renderProfileGames(profile) {
  $("#profile-games").hidden = profile === null;
  if (profile === null) return;
  const cell = (col, text) => el("td", { "data-col": col, text: String(text) });
  $("#profile-best").tBodies[0].replaceChildren(...profile.best.map((game) => gameRow(game, cell("cells", game.cells))));
  $("#profile-best").hidden = profile.best.length === 0;
  $("#profile-best-none").hidden = profile.best.length > 0;
  $("#profile-recent").tBodies[0].replaceChildren(
    ...profile.recent.map((game) => gameRow(game, cell("result", game.won ? "Won" : "Resigned"))),
  );
  $("#profile-recent").hidden = profile.recent.length === 0;
  $("#profile-recent-none").hidden = profile.recent.length > 0;
}

export class Leaderboards {
  constructor({ connection, player, shownCode, playDeal }) {
    this.conn = connection;
    this.playDeal = playDeal;      // (code) => deal that deal again (a profile row's button)
    this.player = player;          // () => {id, name} | null
    this.shownCode = shownCode;    // () => the code of the game on the table, or null
    this.query = null;             // the fields of the board shown
    this.rows = [];                // its rows so far (pages appended by "More")
    this.next = null;              // the cursor of the next page
    this.around = false;           // the rows are the page around the player's own row
    this.pending = null;           // the request awaited: older replies are dropped
    this.error = null;
    this.profile = null;           // the last `profile` reply shown
    this.profileFor = null;        // whose profile is asked for (null: one's own)
    this.profileError = null;
    this.codeEdited = false;       // the deal board's code follows the shown game until one is typed
    this.drawn = null;
    this.drawnGames = null;
  }

  get open() {
    return $("#leaderboards").open;
  }

  /** The fields of a `leaderboard` request from the form: only those that belong to the board. */
  formQuery() {
    const form = $("#leaderboard-form").elements;
    const board = form.board.value;
    const query = { board };
    if (board === "daily" || board === "variant" || board === "rating") query.cells = Number(form.cells.value);
    if (board === "deal") query.code = form.code.value.trim() || undefined;  // the server says it is required
    if (board === "daily") query.date = form.date.value || undefined;       // default: today (UTC)
    if (board !== "daily" && board !== "rating") query.period = form.period.value;
    query.order = form.order.value;
    return query;
  }

  async requestPage(query, { after, around } = {}) {
    const reply = this.conn.request("leaderboard", { ...query, limit: LEADERBOARD_LIMIT, after, around });
    if (reply === null) {
      this.error = "Not connected to the server; reconnecting…";
      this.render();
      return;
    }
    const pending = { query, append: after !== undefined, around: around !== undefined };
    this.pending = pending;
    this.error = null;
    this.render();
    const message = await reply;
    if (this.pending !== pending) return;  // superseded by a newer request
    this.pending = null;
    if (message === null) return;
    if (message.type === "error") {
      if (!pending.append) {
        this.query = null;  // the rows shown no longer answer the form
        this.rows = [];
        this.next = null;
      }
      this.error = message.message;
    } else {
      this.error = null;
      this.query = query;
      this.rows = pending.append ? [...this.rows, ...message.rows] : message.rows;
      this.next = message.next ?? null;
      this.around = pending.append ? this.around : pending.around;
    }
    this.render();
  }

  async requestProfile(playerId) {
    this.profileFor = playerId ?? null;
    const reply = this.conn.request("profile", { player: playerId });
    if (reply === null) return;
    const message = await reply;
    if (message === null || (playerId ?? null) !== this.profileFor) return;
    if (message.type === "error") {
      this.profileError = message.message;
    } else {
      this.profile = message;
      this.profileError = null;
    }
    this.render();
  }

  /** The board the form describes, from its first page, and one's own profile with it. */
  refresh() {
    this.requestProfile(null);
    this.requestPage(this.formQuery());
  }

  /** Something changed (a game finished, a reconnect): reload what is shown, if the panel is open. */
  refreshIfOpen() {
    if (this.open) {
      this.requestProfile(this.profileFor ?? undefined);
      this.requestPage(this.query ?? this.formQuery());
    }
  }

  /** Show the fields that belong to the chosen board, with its orders (keeping the order if it fits). */
  syncForm() {
    const form = $("#leaderboard-form");
    const board = form.elements.board.value;
    for (const label of form.querySelectorAll("[data-applies]")) {
      label.hidden = !label.dataset.applies.split(" ").includes(board);
    }
    const select = form.elements.order;
    const [orders, kind] = ordersOf(board);
    const keep = orders.some(([value]) => value === select.value) ? select.value : orders[0][0];
    if (select.dataset.kind !== kind) {
      select.dataset.kind = kind;
      select.replaceChildren(...orders.map(([value, text]) => el("option", { value, text })));
    }
    select.value = keep;
    $("#score-note").hidden = select.value !== "score";
  }

  bind() {
    const form = $("#leaderboard-form");
    $("#leaderboards").addEventListener("toggle", () => {
      if (this.open) this.refresh();
    });
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.requestPage(this.formQuery());
    });
    form.addEventListener("change", (event) => {
      if (event.target.id === "board-code") return;  // a typed code is sent with Show (or Enter)
      this.syncForm();
      this.requestPage(this.formQuery());
    });
    $("#board-code").addEventListener("input", () => {
      this.codeEdited = $("#board-code").value.trim() !== "";
    });
    $("#leaderboard-more").addEventListener("click", () => {
      if (this.query && this.next) this.requestPage(this.query, { after: this.next });
    });
    $("#leaderboard-around").addEventListener("click", () => {
      const me = this.player();
      if (me) this.requestPage(this.formQuery(), { around: me.id });
    });
    // A row opens its player's profile (the rows are links in all but name: Enter works too).
    const openRow = (row) => {
      if (!row) return;
      this.requestProfile(row.dataset.playerId);
      $("#profile").scrollIntoView({ block: "nearest" });
    };
    $("#leaderboard-table").addEventListener("click", (event) => {
      if (!event.target.closest("a")) openRow(event.target.closest("tr[data-player-id]"));  // a link goes its way
    });
    $("#leaderboard-table").addEventListener("keydown", (event) => {
      if (event.key === "Enter") openRow(event.target.closest("tr[data-player-id]"));
    });
    $("#profile-mine").addEventListener("click", () => this.requestProfile(null));
    $("#profile-games").addEventListener("click", (event) => {
      const button = event.target.closest("[data-play-code]");
      if (button) this.playDeal(button.dataset.playCode);
    });
    this.syncForm();
  }

  render() {
    const me = this.player() ? this.player().id : null;
    const code = this.shownCode();
    if (!this.codeEdited && code && $("#board-code").value !== code) $("#board-code").value = code;
    $("#leaderboard-around").disabled = !me;
    const error = $("#leaderboard-error");
    error.hidden = !this.error;
    error.textContent = this.error ?? "";
    const more = $("#leaderboard-more");
    more.hidden = !(this.query && this.next);
    more.disabled = this.pending !== null;
    const table = $("#leaderboard-table");
    table.dataset.state = this.pending ? "loading" : this.query ? "loaded" : "empty";
    table.dataset.board = this.query ? this.query.board : "";
    const key = JSON.stringify([this.query, this.rows, this.around, me]);
    if (key !== this.drawn) {
      this.drawn = key;
      this.renderRows(table, me);
    }
    this.renderProfile(me);
  }

  renderRows(table, me) {
    const query = this.query;
    const kind = query === null ? "games" : ordersOf(query.board)[1];
    const players = kind === "players";
    const games = kind === "games";
    const heads = {
      players: ["#", "Player", "Played", "Won", "Win %"],
      rating: ["#", "Player", "Rating", "Races"],
      games: ["#", "Player", "Moves", "Time", "Score", "Won", ""],
    }[kind];
    table.hidden = !query || this.rows.length === 0;
    table.createCaption().textContent = query ? describeQuery(query) : "";
    table.tHead.replaceChildren(el("tr", {}, ...heads.map((text) => el("th", { scope: "col", text }))));
    table.tBodies[0].replaceChildren(
      ...this.rows.map((row) => {
        const mine = row.player.id === me;
        const cell = (col, text, title) => el("td", { "data-col": col, text: String(text), title });
        const figures = {
          players: () => [cell("played", row.played), cell("won", row.won), cell("win_rate", formatRate(row.win_rate))],
          rating: () => [cell("rating", row.rating), cell("races", row.races)],
          games: () => [
            cell("moves", row.moves),
            cell("time", formatDuration(row.duration_ms)),
            cell("score", row.score),
            cell("won", row.won ? "✓" : "✗", row.won ? "won" : "resigned"),
            el("td", { "data-col": "replay" }, replayLink(row.game)),
          ],
        }[kind]();
        return el(
          "tr",
          {
            "data-rank": String(row.rank),
            "data-player-id": row.player.id,
            "data-won": games ? String(row.won) : undefined,
            "aria-current": mine ? "true" : undefined,
            className: mine ? "mine" : "",
            title: `${playerLabel(row.player)}'s profile${games ? ` · ${row.code}` : ""}`,
            tabIndex: 0,
          },
          cell("rank", row.rank),
          cell("player", mine ? `${playerLabel(row.player)} (you)` : playerLabel(row.player)),
          ...figures,
        );
      }),
    );
    const empty = $("#leaderboard-empty");
    empty.hidden = !query || this.rows.length > 0;
    empty.textContent = this.around
      ? "You have no row on this board yet."
      : players ? "No finished games in this period yet."
        : kind === "rating" ? "No rated race in this variant yet." : "No finished games on this board yet.";
  }

  renderProfile(me) {
    const profile = this.profile;
    const box = $("#profile");
    box.dataset.loaded = String(profile !== null);
    box.dataset.playerId = profile ? profile.player.id : "";
    const own = profile === null || profile.player.id === me;
    $("#profile-title").textContent = own ? "Your profile" : `${playerLabel(profile.player)}'s profile`;
    $("#profile-mine").hidden = own;
    const values = profile
      ? {
        played: profile.played,
        won: profile.won,
        win_rate: formatRate(profile.win_rate),
        streak: `${profile.streak.current} (best ${profile.streak.best})`,
        best_score: profile.best_score,
        ratings: formatRatings(profile.ratings ?? []),
      }
      : { played: "–", won: "–", win_rate: "–", streak: "–", best_score: "–", ratings: "–" };
    for (const [name, value] of Object.entries(values)) {
      box.querySelector(`[data-field="${name}"]`).textContent = String(value);
    }
    const streak = box.querySelector('[data-field="streak"]');
    streak.dataset.current = profile ? String(profile.streak.current) : "";
    streak.dataset.best = profile ? String(profile.streak.best) : "";
    const key = JSON.stringify(profile && [profile.best, profile.recent]);
    if (key !== this.drawnGames) {
      this.drawnGames = key;
      renderProfileGames(profile);
    }
    const profileError = $("#profile-error");
    profileError.hidden = !this.profileError;
    profileError.textContent = this.profileError ?? "";
  }
}
