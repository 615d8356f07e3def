// The page's estimate of the server's clock (web/clock.js) under node's test runner: a machine clock
// minutes off, round trips of different lengths, failed samples, and a machine clock changed mid-game.
import assert from "node:assert/strict";
import { test } from "node:test";

import { ServerClock } from "../../web/clock.js";
import { elapsedText } from "../../web/render.js";

/** A fake world: the server's clock, the machine's (off by `skew`), a monotonic clock, and a read of
 * the server's time that takes `trips[i]` ms of round trip, the server reading its clock after `up`. */
function world({ skew, trips, upShare = 0.5 }) {
  const w = { t: 1_000_000, serverEpoch: Date.UTC(2026, 11, 1, 21, 0, 0), skew, i: 0 };
  w.server = () => w.serverEpoch + w.t;
  w.clock = new ServerClock({ monotonic: () => w.t, wall: () => w.server() + w.skew });
  w.read = async () => {
    const trip = trips[w.i++ % trips.length];
    if (trip === null) throw new Error("no answer");
    w.t += trip * upShare;
    const seen = w.server();
    w.t += trip * (1 - upShare);
    return seen;
  };
  return w;
}

test("before a sync the machine's clock serves, and the clock is not ready", () => {
  const w = world({ skew: 600_000, trips: [10] });
  assert.equal(w.clock.ready, false);
  assert.equal(w.clock.now(), w.server() + 600_000);
});

test("a machine clock ten minutes off: the server's time within half the shortest round trip", async () => {
  for (const skew of [600_000, -600_000, 0]) {
    const w = world({ skew, trips: [400, 30, 200], upShare: 1 });  // the worst case: read at the very end
    await w.clock.sync(w.read);
    assert.equal(w.clock.ready, true);
    assert.ok(Math.abs(w.clock.now() - w.server()) <= 15, `${skew}: ${w.clock.now() - w.server()}`);
    w.t += 3_600_000;  // an hour on: still carried by the monotonic clock
    assert.ok(Math.abs(w.clock.now() - w.server()) <= 15);
    w.skew += 120_000;  // the machine's clock set two minutes ahead mid-game: nothing changes
    assert.ok(Math.abs(w.clock.now() - w.server()) <= 15);
  }
});

test("failed reads are skipped; with none answered the machine's clock serves", async () => {
  let w = world({ skew: 5_000, trips: [null, 20, null] });
  await w.clock.sync(w.read);
  assert.ok(Math.abs(w.clock.now() - w.server()) <= 10);
  w = world({ skew: 5_000, trips: [null] });
  await w.clock.sync(w.read);
  assert.equal(w.clock.ready, true);
  assert.equal(w.clock.now(), w.server() + 5_000);
});

test("a sample from a dealt game's started_at counts when its trip is shorter; a resync starts afresh", async () => {
  const w = world({ skew: -90_000, trips: [300] });
  await w.clock.sync(w.read, 1);
  const sentAt = w.t;
  w.t += 2;
  const startedAt = w.server();
  w.t += 2;
  w.clock.sample(startedAt, sentAt, w.t);
  assert.ok(Math.abs(w.clock.now() - w.server()) <= 2);
  w.clock.sample(w.server() + 50_000, w.t, w.t + 500);  // a longer trip: ignored
  assert.ok(Math.abs(w.clock.now() - w.server()) <= 2);
  w.clock.sample(Number.NaN, w.t, w.t);  // no time at all: ignored
  assert.ok(Math.abs(w.clock.now() - w.server()) <= 2);
  // After a reconnect, another node 7 s ahead: the fresh samples replace the old, however short.
  w.serverEpoch += 7_000;
  await w.clock.sync(w.read, 1);
  assert.ok(Math.abs(w.clock.now() - w.server()) <= 150);
});

test("the game's clock: the server's now minus started_at, then its end, then the server's duration", () => {
  const startedAt = "2026-12-01T21:00:00.000Z";
  const start = Date.parse(startedAt);
  const board = { startedAt, status: "playing" };
  assert.equal(elapsedText({ board, over: null }, start + 601_999), "10:01");
  assert.equal(elapsedText({ board, over: null }, null), "–");  // the server's clock not known yet
  const ended = { startedAt, status: "won", endedAt: start + 103_400 };
  assert.equal(elapsedText({ board: ended, over: null }, start + 500_000), "1:43");
  const over = { won: true, duration_ms: 103_999 };
  assert.equal(elapsedText({ board: ended, over }, start + 500_000), "1:43");
  assert.equal(elapsedText({ board: { startedAt, status: "won" }, over: { won: true } }, start), "–");
});
