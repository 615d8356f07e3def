// The replay viewer's pure stepping (web/replay.js) under node's test runner: a timeline built from
// `replay` pages and live diffs gives, at every version, the board the diff vectors reach
// (protocol/vectors/diffs.json: positions the Python tests check against the engine), and the
// viewer's buttons, slider, keys and live following land where they should.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { applyChange, boardFromSnapshot } from "../../web/board.js";
import {
  addChange, addGameOver, addPage, follow, gameIdOfPath, isComplete, keyAction, lastV, opAt, positionAt, step,
  timelineFromReplay,
} from "../../web/replay.js";

const VECTORS = JSON.parse(readFileSync(new URL("../../protocol/vectors/diffs.json", import.meta.url)));
// A vector game from its deal (v 0) whose updates come one version at a time.
const ENTRY = VECTORS.games.find((entry) => entry.snapshot.v === 0 && entry.steps.every((s, i) => s.update.v === i + 1));

function replayOf(entry, since, count, extra = {}) {
  const { tableau, cells, foundations, game, code, player, started_at } = entry.snapshot;
  const steps = entry.steps.slice(since, since + count).map(({ update }) => ({ ops: update.ops, score: update.score, moves: update.moves }));
  return { type: "replay", game, code, player, started_at, status: "playing", v: entry.steps.length, tableau, cells, foundations, since, steps, ...extra };
}

/** The board the plain board model reaches at every version. */
function expected(entry) {
  const board = boardFromSnapshot(structuredClone(entry.snapshot));
  const found = [structuredClone(board)];
  for (const { update } of entry.steps) {
    applyChange(board, update);
    found.push(structuredClone(board));
  }
  return found;
}

const table = ({ tableau, cells, foundations, score, moves }) => ({ tableau, cells, foundations, score, moves });

test("a vector game to replay exists", () => assert.ok(ENTRY && ENTRY.steps.length >= 4));

test("every position, forward, backward and by jumps, is the board the diffs make", () => {
  const boards = expected(ENTRY);
  const n = ENTRY.steps.length;
  const timeline = timelineFromReplay(replayOf(ENTRY, 0, n));
  assert.ok(isComplete(timeline));
  const order = [...Array(n + 1).keys(), ...[...Array(n + 1).keys()].reverse(), n, 0, Math.floor(n / 2), 1, n];
  for (const v of order) {
    const board = positionAt(timeline, v);
    assert.equal(board.v, v);
    assert.deepEqual(table(board), table(boards[v]), `v ${v}`);
    assert.equal(board.status, v === n ? timeline.status : "playing");
  }
  assert.deepEqual(positionAt(timeline, n + 5).v, n, "clamped to what is held");
  assert.deepEqual(positionAt(timeline, -3).v, 0);
  assert.equal(opAt(timeline, 0), null);
  assert.deepEqual(opAt(timeline, 1), ENTRY.steps[0].update.ops[0]);
});

test("a position handed out cannot change the timeline", () => {
  const timeline = timelineFromReplay(replayOf(ENTRY, 0, 2));
  const board = positionAt(timeline, 2);
  board.tableau[0].push("XX");
  board.cells[0] = "XX";
  assert.notDeepEqual(positionAt(timeline, 2).tableau[0].at(-1), "XX");
  assert.deepEqual(table(positionAt(timeline, 2)), table(expected(ENTRY)[2]));
});

test("pages join, overlaps are skipped and a page past the end is a gap", () => {
  const n = ENTRY.steps.length;
  const timeline = timelineFromReplay(replayOf(ENTRY, 0, 2));
  assert.equal(isComplete(timeline), false);
  assert.equal(addPage(timeline, replayOf(ENTRY, 4, 2)), "gap");
  assert.equal(addPage(timeline, replayOf(ENTRY, 1, 3)), "applied");  // steps 2..4; 2 already held
  assert.equal(lastV(timeline), 4);
  assert.equal(addPage(timeline, replayOf(ENTRY, 4, n, { status: "won", duration_ms: 1234 })), "applied");
  assert.ok(isComplete(timeline));
  assert.equal(timeline.status, "won");
  assert.equal(timeline.durationMs, 1234);
  assert.deepEqual(table(positionAt(timeline, n)), table(expected(ENTRY)[n]));
});

test("live diffs extend the timeline; old ones are ignored, a gap asks for a page", () => {
  const n = ENTRY.steps.length;
  const timeline = timelineFromReplay(replayOf(ENTRY, 0, 2, { v: 2 }));
  assert.equal(addChange(timeline, { type: "snapshot", v: 2, status: "playing" }), "old");
  assert.equal(addChange(timeline, { type: "diff", ...ENTRY.steps[1].update }), "old");
  assert.equal(addChange(timeline, { type: "diff", ...ENTRY.steps[2].update }), "applied");
  assert.equal(addChange(timeline, { type: "diff", ...ENTRY.steps[4].update }), "gap");
  assert.equal(timeline.v, 5, "the gap says how far the game is");
  assert.equal(isComplete(timeline), false);
  assert.equal(addPage(timeline, replayOf(ENTRY, 3, n)), "applied");
  assert.equal(lastV(timeline), n);
  assert.equal(addChange(timeline, { type: "snapshot", v: n + 2, status: "playing" }), "gap");
  addGameOver(timeline, { won: false, duration_ms: 99 });
  assert.equal(timeline.status, "resigned");
  assert.equal(positionAt(timeline, lastV(timeline)).status, "resigned");
});

test("the buttons, the slider and play step within the game", () => {
  const timeline = timelineFromReplay(replayOf(ENTRY, 0, 3));
  let view = { at: 0, playing: false };
  view = step(view, timeline, "back");
  assert.deepEqual(view, { at: 0, playing: false }, "not before the deal");
  view = step(view, timeline, "forward");
  assert.equal(view.at, 1);
  view = step(view, timeline, "last");
  assert.equal(view.at, 3);
  view = step(view, timeline, "forward");
  assert.equal(view.at, 3, "not past the end");
  view = step(view, timeline, { seek: 2 });
  assert.deepEqual(view, { at: 2, playing: false });
  view = step(view, timeline, { seek: 99 });
  assert.equal(view.at, 3);
  view = step(view, timeline, "play");
  assert.deepEqual(view, { at: 0, playing: true }, "play at the end starts over");
  view = step(view, timeline, "tick");
  view = step(view, timeline, "tick");
  assert.deepEqual(view, { at: 2, playing: true });
  view = step(view, timeline, "tick");
  assert.deepEqual(view, { at: 3, playing: false }, "play stops at the end");
  view = step({ at: 1, playing: true }, timeline, "play");
  assert.deepEqual(view, { at: 1, playing: false }, "pause");
  assert.deepEqual(step({ at: 2, playing: true }, timeline, "first"), { at: 0, playing: false });
});

test("a viewer at the end follows a live game; one looking back stays", () => {
  const timeline = timelineFromReplay(replayOf(ENTRY, 0, 2, { v: 2 }));
  addChange(timeline, { type: "diff", ...ENTRY.steps[2].update });
  assert.deepEqual(follow({ at: 2, playing: false }, 2, timeline), { at: 3, playing: false });
  assert.deepEqual(follow({ at: 1, playing: false }, 2, timeline), { at: 1, playing: false });
});

test("keys and page paths", () => {
  assert.equal(keyAction("ArrowLeft"), "back");
  assert.equal(keyAction("ArrowRight"), "forward");
  assert.equal(keyAction("Home"), "first");
  assert.equal(keyAction("End"), "last");
  assert.equal(keyAction(" "), "play");
  assert.equal(keyAction("x"), null);
  assert.equal(gameIdOfPath("/g/Qm81Zt_e3VhN0pWa"), "Qm81Zt_e3VhN0pWa");
  assert.equal(gameIdOfPath("/g/a%2Db"), "a-b");
  // bad input: a path that is no game id
  for (const bad of ["/g/", "/g/bad!id", "/g/a/b", `/g/${"x".repeat(33)}`, "/g/%ZZ", "/x/abc", "/g/a%2Fb"]) {
    assert.equal(gameIdOfPath(bad), null, bad);
  }
});
