// The browser client's pure modules under node's test runner (`node --test tests/web/`): the board
// model against the diff vectors the Python tests check (protocol/vectors/diffs.json), and the
// player words of the server's refusals.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { applyChange, boardFromSnapshot, liftProblem, pileCards } from "../../web/board.js";
import { cardText, formatDuration, liftText, playerReason } from "../../web/words.js";

const VECTORS = JSON.parse(readFileSync(new URL("../../protocol/vectors/diffs.json", import.meta.url)));

function state(board) {
  const { tableau, cells, foundations, v, score, moves, status } = board;
  return { tableau, cells, foundations, v, score, moves, status };
}

for (const entry of VECTORS.games) {
  test(`diff vectors of ${entry.snapshot.game} (${entry.snapshot.code}) keep the board exact`, () => {
    const snapshot = structuredClone(entry.snapshot);
    const board = boardFromSnapshot(snapshot);
    assert.equal(board.startedAt, entry.snapshot.started_at);
    entry.steps.forEach((step, index) => {
      assert.equal(applyChange(board, step.update), step.result, `step ${index}`);
      assert.deepEqual(state(board), step.after, `step ${index}`);
    });
    assert.deepEqual(snapshot, entry.snapshot, "the snapshot message is left as it came");
  });
}

test("the vectors hold take-backs, groups, a won game, old and gap updates", () => {
  const steps = VECTORS.games.flatMap((entry) => entry.steps);
  const ops = steps.flatMap((step) => step.update.ops);
  assert.ok(ops.some((op) => op.from[0] === "f"));
  assert.ok(ops.some((op) => op.cards.length > 1));
  assert.deepEqual(new Set(steps.map((step) => step.result)), new Set(["applied", "old", "gap"]));
  assert.equal(steps.at(-1).after.status, "won");
});

test("pileCards reads columns, cells and foundation tops", () => {
  const board = boardFromSnapshot(VECTORS.games[0].snapshot);
  assert.deepEqual(pileCards(board, "t1"), VECTORS.games[0].snapshot.tableau[0]);
  assert.deepEqual(pileCards(board, "c1"), [VECTORS.games[0].snapshot.cells[0]]);
  assert.deepEqual(pileCards(board, "c8"), []);
  assert.deepEqual(pileCards(board, "fH"), []);
});

test("refusals read as the rule in player words", () => {
  const cases = [
    ["t3-t1 is illegal: wrong suit: 7H does not go onto 8S", "7♥ goes only on 8♥"],
    ["t3-t1 is illegal: wrong rank: TD does not go onto QD", "10♦ goes only on J♦"],
    ["c1-t2 is illegal: wrong suit: KC does not go onto AS", "K♣ goes only into an empty column"],
    ["t1-fS is illegal: wrong suit: 7H does not go onto fS", "7♥ goes only on the ♥ foundation"],
    ["t1-fH is illegal: foundation out of order: fH takes 3H next, not 5H", "The ♥ foundation takes 3♥ next"],
    ["t2-t5 is illegal: only a King goes into an empty column, not QS", "Only a King goes into an empty column"],
    ["t1-c2 is illegal: c2 is occupied", "Cell 2 already holds a card"],
    ["t3-t8:2 is illegal: the top 2 cards of t3 are not a same-suit run", "Only a run of one suit in order moves together"],
    [
      "t3-t8:5 is illegal: group too large: 5 cards, at most 4 with 1 empty cell(s) and 1 empty column(s)",
      "5 cards are too many to move at once: 4 at most now (free cells and empty columns allow more)",
    ],
    ["double tap: nowhere to put 9C from t4", "9♣ has nowhere to go"],
    ["undo is illegal: nothing to undo", "Nothing to undo"],
    ["the game is won", "This game is over"],
    ["something new about AS", "Something new about A♠"],
  ];
  for (const [server, player] of cases) assert.equal(playerReason(server), player, server);
});

test("cards and durations print as a player reads them", () => {
  assert.equal(cardText("TD"), "10♦");
  assert.equal(cardText("QS"), "Q♠");
  assert.equal(formatDuration(754_012), "12:34");
  assert.equal(formatDuration(3_723_000), "1:02:03");
  assert.equal(formatDuration(-5), "0:00");
});

function boardOf(tableau, cells) {
  return { tableau, cells, foundations: { S: null, H: null, D: null, C: null } };
}

test("only a run a move could take is picked up (the rules' group sizes)", () => {
  const full = ["QC", "7C", "TD", "KC"];
  const columns = (first) => [first, ["2S"], ["3S"], ["4S"], ["5S"], ["6S"], ["7S"], ["8S"]];
  // The 9♥, 3♠, 8♥: not a run.
  let board = boardOf(columns(["KD", "9H", "3S", "8H"]), [...full, null, null, null, null]);
  assert.deepEqual(liftProblem(board, "t1", 3), { notRun: true });
  assert.equal(liftText(["9H", "3S", "8H"], { notRun: true }),
    "9♥, 3♠ and 8♥ are not a run: only a run of one suit in order moves together");
  // Same suit but a gap in rank, and a run in the wrong direction.
  board = boardOf(columns(["9H", "7H"]), [...full, null, null, null, null]);
  assert.deepEqual(liftProblem(board, "t1", 2), { notRun: true });
  board = boardOf(columns(["8H", "9H"]), [...full, null, null, null, null]);
  assert.deepEqual(liftProblem(board, "t1", 2), { notRun: true });
  // A run of 5 with 4 free cells and no empty column: (4 + 1) × 1 = 5 is the limit.
  const run = ["KH", "QH", "JH", "TH", "9H", "8H"];
  board = boardOf(columns(run), [...full, null, null, null, null]);
  assert.equal(liftProblem(board, "t1", 5), null);
  assert.deepEqual(liftProblem(board, "t1", 6), { limit: 5 });
  assert.equal(liftText(run, { limit: 5 }),
    "6 cards are too many to move at once: 5 at most now (free cells and empty columns allow more)");
  // No free cell, one empty column: (0 + 1) × 2 = 2.
  const withEmpty = columns(run);
  withEmpty[7] = [];
  board = boardOf(withEmpty, ["AS", "AH", "AD", "AC"]);
  assert.equal(liftProblem(board, "t1", 2), null);
  assert.deepEqual(liftProblem(board, "t1", 3), { limit: 2 });
  // One card, a cell or a foundation: always.
  assert.equal(liftProblem(board, "t1", 1), null);
  assert.equal(liftProblem(board, "c1", 1), null);
});
