// The race model (web/race.js) under node's test runner: the standings kept from a `race` snapshot and
// its diffs (a gap, an old diff, seats joining and freed), the /r/ link read from a path, the places
// and headline of the end, and a rating change shown only when the server sends one.
// Bad input tried: links with a code too short, too long, with I/L/O, with a slash after it, with a
// broken %-escape, and empty; a diff of another race; a diff that skips a version.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  applyRaceDiff, boardDelayText, endReason, miniBoard, movesText, ordinal, raceFromSnapshot, raceLink, raceRefusal,
  ratingChange, rematchOffer, resultTitle, results, secondsUntil, showsBoards, standings, startFrees, startProblem,
} from "../../web/race.js";

const ANN = { id: "ann", name: "Ann" };
const BO = { id: "bo", name: "Bo" };
const CY = { id: "cy", name: "Cy" };

function row(seat, player, fields = {}) {
  return { seat, player, ready: false, game: null, status: "waiting", cards_home: 0, moves: 0, score: 0, time_ms: 0, place: null, ...fields };
}

function snapshot(rows, fields = {}) {
  return {
    type: "race", id: 3, race: "R1", v: 1, code: "K7M2QX9P", creator: "ann", cells: 8, seats: 2, time_limit: 300,
    public: false, state: "lobby", starts_at: null, ends_at: null, deal: null, rows, ...fields,
  };
}

function diff(v, rows, fields = {}) {
  return { type: "race_diff", race: "R1", v, creator: "ann", state: "lobby", starts_at: null, ends_at: null, deal: null, rows, gone: [], ...fields };
}

test("a link names a race by its code; a malformed one says what a code looks like", () => {
  assert.equal(raceLink("/"), null);
  assert.equal(raceLink("/app.js"), null);
  assert.deepEqual(raceLink("/r/K7M2QX9P"), { code: "K7M2QX9P" });
  assert.deepEqual(raceLink("/r/k7m2qx9p/"), { code: "K7M2QX9P" });  // typed in lower case
  for (const bad of ["/r/", "/r/K7M2QX9", "/r/K7M2QX9PP", "/r/K7M2QX9O", "/r/ILLLLLLL", "/r/K7M2QX9P/x", "/r/%E0%A4%A"]) {
    assert.match(raceLink(bad).error, /not valid: a race code is 8 letters and digits/, bad);
  }
});

test("the standings are the snapshot, then each diff in v order", () => {
  const message = snapshot([row(1, ANN, { ready: true })]);
  const race = raceFromSnapshot(message);
  assert.equal(applyRaceDiff(race, diff(2, [row(2, BO)])), "applied");
  assert.deepEqual(race.rows.map((r) => r.player.name), ["Ann", "Bo"]);
  assert.equal(message.rows.length, 1);  // the message stays as it came
  assert.equal(applyRaceDiff(race, diff(2, [row(2, BO, { ready: true })])), "old");
  assert.equal(race.rows[1].ready, false);
  assert.equal(applyRaceDiff(race, diff(4, [])), "gap");
  assert.equal(applyRaceDiff(race, { ...diff(3, []), race: "R2" }), "old");  // another race's: ignored
  assert.equal(race.v, 2);
  assert.equal(applyRaceDiff(race, diff(3, [], { gone: [1], creator: "bo" })), "applied");
  assert.deepEqual(race.rows.map((r) => r.seat), [2]);
  assert.equal(race.creator, "bo");
});

test("the creator may start once its seat and another are ready; the start frees the others", () => {
  const race = raceFromSnapshot(snapshot([row(1, ANN, { ready: true })]));
  assert.equal(startProblem(race), "Waiting for a second player.");
  applyRaceDiff(race, diff(2, [row(2, BO)]));
  assert.equal(startProblem(race), "Waiting for Bo to be ready.");
  applyRaceDiff(race, diff(3, [row(2, BO, { ready: true })]));
  assert.equal(startProblem(race), null);
  assert.deepEqual(startFrees(race), []);
  applyRaceDiff(race, diff(4, [row(1, ANN, { ready: false }), row(3, CY)]));
  assert.equal(startProblem(race), "Waiting for Ann to be ready.");
  applyRaceDiff(race, diff(5, [row(1, ANN, { ready: true })]));
  assert.equal(startProblem(race), null);
  assert.deepEqual(startFrees(race), ["Cy"]);
  applyRaceDiff(race, diff(6, [], { state: "countdown", starts_at: "2026-12-02T05:10:05.000Z", gone: [3] }));
  assert.equal(startProblem(race), "The race has started.");
  assert.equal(secondsUntil(race.starts_at, Date.parse("2026-12-02T05:10:01.200Z")), 4);
  assert.equal(secondsUntil(race.starts_at, Date.parse("2026-12-02T05:10:09.000Z")), 0);
  assert.equal(secondsUntil(race.starts_at, null), null);
});

test("bars: seats in seat order, cards home of 52, the viewer's marked", () => {
  const race = raceFromSnapshot(snapshot([
    row(1, ANN, { status: "playing", cards_home: 13, moves: 20, score: 130, time_ms: 61000 }),
    row(2, BO, { status: "resigned", cards_home: 26, moves: 40 }),
  ], { state: "running" }));
  const bars = standings(race, "bo");
  assert.deepEqual(bars.map((b) => [b.seat, b.progress, b.mine, b.statusText]), [[1, 0.25, false, "playing"], [2, 0.5, true, "resigned"]]);
  assert.equal(bars[0].creator, true);
});

test("the end: places with ties, the headline for each viewer, and why it ended", () => {
  const finished = (places, statuses) => raceFromSnapshot(snapshot([
    row(1, ANN, { status: statuses[0], place: places[0], cards_home: 52 }),
    row(2, BO, { status: statuses[1], place: places[1] }),
    row(3, { id: "cy", name: "Cy" }, { status: statuses[2], place: places[2] }),
  ], { state: "finished", seats: 3 }));
  const won = finished([1, 2, 3], ["won", "playing", "left"]);
  assert.equal(resultTitle(won, "ann"), "You won the race!");
  assert.equal(resultTitle(won, "bo"), "You placed 2nd of 3");
  assert.equal(resultTitle(won, "someone"), "Ann won the race");
  assert.equal(endReason(won), "The first to win takes the race.");
  const timeUp = finished([2, 1, 2], ["playing", "playing", "playing"]);
  assert.deepEqual(results(timeUp, "ann").map((r) => r.name), ["Bo", "Ann", "Cy"]);
  assert.equal(resultTitle(timeUp, "cy"), "You placed 2nd of 3 (tied)");
  assert.match(endReason(timeUp), /^Time is up/);
  assert.deepEqual(standings(timeUp, "ann").map((r) => r.statusText), ["unfinished", "unfinished", "unfinished"]);
  assert.deepEqual([0, 1, 2].map(movesText), ["0 moves", "1 move", "2 moves"]);
  const cancelled = raceFromSnapshot(snapshot([], { state: "cancelled" }));
  assert.equal(resultTitle(cancelled, "ann"), "The race was cancelled");
  assert.match(endReason(cancelled), /^It was cancelled before the start/);
  assert.deepEqual([1, 2, 3, 4, 11, 12, 13, 21, 22, 101].map(ordinal), ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st"]);
});

test("a rating change is shown only when the server sends one", () => {
  assert.equal(ratingChange(row(1, ANN)), null);
  assert.equal(ratingChange(row(1, ANN, { rating: null })), null);
  assert.equal(ratingChange(row(1, ANN, { rating: { before: 1000 } })), null);
  assert.deepEqual(ratingChange(row(1, ANN, { rating: { before: 1000, after: 1042 } })), { before: 1000, after: 1042, delta: 42, text: "1042 (+42)" });
  assert.equal(ratingChange(row(1, ANN, { rating_before: 1010, rating_after: 998 })).text, "998 (−12)");
});

test("refusals in player words", () => {
  assert.equal(raceRefusal("race_join", { code: "not_found", message: "no race has the invitation code ABCDEFGH" }), "No race has that code. Check the link or the code.");
  assert.equal(raceRefusal("race_join", { code: "illegal_move", message: "race R1 is full (2 seats)" }), "That race is full.");
  assert.equal(raceRefusal("race_join", { code: "illegal_move", message: "race R1 has started: race_watch it" }), "That race has already started: it can't be joined now.");
  assert.equal(raceRefusal("race_start", { code: "illegal_move", message: "race R1: your seat 1 is not ready" }), "Your seat and one more must be ready first.");
  assert.equal(raceRefusal("race_start", { code: "illegal_move", message: "race R1 needs 2 seats ready: seat(s) 2 not ready" }), "Your seat and one more must be ready first.");
});

test("a finished race offers its seats a rematch, then to join the one made; a spectator only joins", () => {
  const race = raceFromSnapshot(snapshot([row(1, ANN, { place: 1 }), row(2, BO, { place: 2 })], { state: "finished", v: 9 }));
  assert.equal(race.rematch, null);
  assert.deepEqual(rematchOffer(race, "ann"), { label: "Rematch", type: "race_rematch", fields: { race: "R1" } });
  assert.equal(rematchOffer(race, "cy"), null);  // a spectator: nothing to join yet
  assert.equal(applyRaceDiff(race, diff(10, [], { state: "finished", rematch: { race: "R2", code: "H4RX7KMB" } })), "applied");
  assert.deepEqual(race.rematch, { race: "R2", code: "H4RX7KMB" });
  assert.deepEqual(rematchOffer(race, "bo"), { label: "Join the rematch", type: "race_rematch", fields: { race: "R1" } });
  assert.deepEqual(rematchOffer(race, "cy"), { label: "Join the rematch", type: "race_join", fields: { code: "H4RX7KMB" } });
  assert.equal(applyRaceDiff(race, diff(11, [], { state: "finished" })), "applied");  // a later diff keeps it
  assert.deepEqual(race.rematch, { race: "R2", code: "H4RX7KMB" });
  const running = raceFromSnapshot(snapshot([row(1, ANN)], { state: "running" }));
  assert.equal(rematchOffer(running, "ann"), null);
  const linked = raceFromSnapshot(snapshot([row(1, ANN)], { state: "finished", rematch: { race: "R2", code: "H4RX7KMB" } }));
  assert.equal(rematchOffer(linked, "ann").label, "Join the rematch");
});

test("only a spectator sees the seats' boards, with how late they are", () => {
  const race = raceFromSnapshot(snapshot([row(1, ANN), row(2, BO)], { state: "running", board_delay_ms: 30000 }));
  assert.equal(showsBoards(race, "ann"), false);  // a racer: never a rival's board before the end
  assert.equal(showsBoards(race, "cy"), true);
  assert.match(boardDelayText(race), /each board is shown 30 s late/);
  race.board_delay_ms = 1500;
  assert.match(boardDelayText(race), /1.5 s late/);
  race.board_delay_ms = null;  // another server, which does not say
  assert.match(boardDelayText(race), /shown late/);
  assert.equal(showsBoards(raceFromSnapshot(snapshot([row(1, ANN)])), "cy"), false);  // the lobby: no board yet
  race.state = "finished";
  assert.match(boardDelayText(race), /final boards/);
});

test("a board read for a small picture; anything else is no board", () => {
  const board = {
    type: "snapshot", game: "g2", v: 4, code: "EO1-C8-AAAAAFA", player: BO, tableau: [["3C", "AH"], []],
    cells: ["QC", null], foundations: { S: null, H: "2H", D: null, C: null }, score: 5, moves: 4, status: "playing",
  };
  const mini = miniBoard(board);
  assert.deepEqual(mini.foundations.map((f) => f.top), [null, "2H", null, null]);
  assert.deepEqual(mini.cells, ["QC", null]);
  assert.deepEqual(mini.tableau, [["3C", "AH"], []]);
  assert.equal(mini.v, 4);
  mini.tableau[0].push("KD");
  assert.deepEqual(board.tableau[0], ["3C", "AH"]);  // a copy
  for (const bad of [null, undefined, {}, { tableau: [] }, { cells: [] }]) assert.equal(miniBoard(bad), null);
});

test("a refused rematch in player words", () => {
  assert.equal(raceRefusal("race_rematch", { code: "illegal_move", message: "race R2 is full (2 seats)" }), "The rematch is full.");
  assert.equal(raceRefusal("race_rematch", { code: "illegal_move", message: "race R2 has started: race_watch it" }),
    "The rematch has already started without you.");
  assert.equal(raceRefusal("race_rematch", { code: "illegal_move", message: "race R1 is running: a rematch follows a finished race" }),
    "A rematch can only follow a finished race you played in.");
  assert.equal(raceRefusal("race_rematch", { code: "rate_limited", message: "too many" }), "Too many races too fast: wait a minute and try again.");
});
