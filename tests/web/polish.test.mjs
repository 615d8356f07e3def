// The pure parts of the client's polish under node's test runner: which cards fly and for how long
// (animate.js), the name tags (names.js), the sound of a change and the remembered choice (sound.js),
// and the celebration's pieces (celebrate.js).
import assert from "node:assert/strict";
import { test } from "node:test";

import { BURST_MS, FLIGHT_MAX_MS, FLIGHT_MIN_MS, flightMs, flightsBetween, inBurst } from "../../web/animate.js";
import { CELEBRATION_MS, confetti } from "../../web/celebrate.js";
import { playerLabel, playerTag } from "../../web/names.js";
import { SOUND_KEY, soundFor, soundOn } from "../../web/sound.js";

const rect = (left, top) => ({ left, top, width: 60, height: 84 });

test("only the cards drawn elsewhere fly, from where they were to where they are", () => {
  const before = new Map([["AH", rect(10, 300)], ["5C", rect(100, 300)], ["KD", rect(200, 300)]]);
  const after = new Map([["AH", rect(400, 20)], ["5C", rect(100.4, 300.5)], ["2S", rect(0, 0)]]);
  assert.deepEqual(flightsBetween(before, after), [{ card: "AH", from: rect(10, 300), to: rect(400, 20) }]);
  assert.deepEqual(flightsBetween(new Map(), after), []);  // a first draw: nothing flies
});

test("a flight lasts long enough to be seen and never long", () => {
  assert.equal(flightMs(rect(0, 0), rect(0, 0)), FLIGHT_MIN_MS);
  assert.equal(flightMs(rect(0, 0), rect(5000, 5000)), FLIGHT_MAX_MS);
  const mid = flightMs(rect(0, 0), rect(240, 180));  // 300 px
  assert.ok(mid > FLIGHT_MIN_MS && mid < FLIGHT_MAX_MS);
  assert.ok(FLIGHT_MIN_MS >= 240, "a double tap's second tap (60-250 ms) lands during the flight");
  assert.ok(inBurst(1000, 1000 - BURST_MS + 1) && !inBurst(1000, 1000 - BURST_MS) && !inBurst(0, -Infinity));
});

test("two players of one name get different, stable tags", () => {
  const tags = new Set();
  for (let i = 0; i < 2000; i += 1) tags.add(playerTag(`player-id-${i}`));
  assert.ok(tags.size > 1990, `${tags.size} tags for 2000 ids`);
  assert.equal(playerTag("Q4SZtQv1hhl3CQZK"), playerTag("Q4SZtQv1hhl3CQZK"));
  assert.match(playerTag("x"), /^[0-9A-HJKMNP-TV-Z]{4}$/);  // no I, L, O, U
  const a = playerLabel({ id: "Q4SZtQv1hhl3CQZK", name: "Cleo" });
  const b = playerLabel({ id: "SWQnHtI1jY2Fdq-_", name: "Cleo" });
  assert.notEqual(a, b);
  assert.match(a, /^Cleo #[0-9A-Z]{4}$/);
  assert.equal(playerLabel({ id: "", name: "" }).startsWith(" #"), true);  // bad input: still a label
});

test("each change has its sound; sound is off unless turned on", () => {
  const op = (from, to) => ({ cards: ["AH"], from, to });
  assert.equal(soundFor({ ops: [op("t1", "fH")], status: "playing" }), "home");
  assert.equal(soundFor({ ops: [op("t1", "c1")], status: "playing" }), "place");
  assert.equal(soundFor({ ops: [op("fH", "t1")], status: "playing" }), "place");  // an undo of a home move
  assert.equal(soundFor({ ops: [op("t1", "fH")], status: "won" }), "win");
  assert.equal(soundFor({ ops: [], status: "playing" }), null);
  const store = (value) => ({ getItem: (key) => (key === SOUND_KEY ? value : null) });
  assert.equal(soundOn(store(null)), false);
  assert.equal(soundOn(store("off")), false);
  assert.equal(soundOn(store("yes")), false);  // bad input: off
  assert.equal(soundOn(store("on")), true);
  assert.equal(soundOn({ getItem: () => { throw new Error("storage disabled"); } }), false);
});

test("the celebration's pieces land in time, the same for a seed", () => {
  const pieces = confetti(36, 42);
  assert.equal(pieces.length, 36);
  assert.deepEqual(confetti(36, 42), pieces);
  assert.notDeepEqual(confetti(36, 43), pieces);
  for (const piece of pieces) {
    assert.ok(piece.left >= 0 && piece.left <= 96);
    assert.ok(piece.delay + piece.duration <= CELEBRATION_MS, JSON.stringify(piece));
    assert.ok(piece.duration >= 1200);
  }
  assert.equal(confetti(4, 0).length, 4);  // seed 0 is not stuck at 0
});
