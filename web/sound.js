// Optional sound, made with WebAudio (no file to download): off until the player turns it on; the
// choice is remembered. A card laid down clicks, a card sent home rings, a win plays a short rise.
//
// soundFor() is pure (tests/web/sound.test.mjs runs it under node).

export const SOUND_KEY = "eightoff.sound";  // localStorage: "on" or "off"

const MIN_GAP_MS = 80;

/** Notes (Hz, start s, length s) of each sound. */
const SOUNDS = {
  place: [[330, 0, 0.05]],
  home: [[660, 0, 0.09], [990, 0.05, 0.12]],
  win: [[523, 0, 0.16], [659, 0.12, 0.16], [784, 0.24, 0.16], [1047, 0.36, 0.35]],
  refused: [[150, 0, 0.09]],
};

/** The sound of an `ack` or `diff` the board took (its ops `{cards, from, to}`), or null. */
export function soundFor(change) {
  if (change.status === "won") return "win";
  const ops = change.ops ?? [];
  if (ops.some((op) => op.to[0] === "f")) return "home";
  return ops.length > 0 ? "place" : null;
}

/** The remembered choice: sound is off unless the player turned it on. */
export function soundOn(storage) {
  try { return storage.getItem(SOUND_KEY) === "on"; } catch { return false; }
}

export class Sound {
  constructor(storage) {
    this.storage = storage;
    this.on = soundOn(storage);
    this.context = null;  // made at the first sound after a gesture (browsers require one)
    this.last = -Infinity;
  }

  /** Turn sound on or off, and remember it. */
  set(on) {
    this.on = on;
    try { this.storage.setItem(SOUND_KEY, on ? "on" : "off"); } catch { /* not remembered */ }
    if (on) this.play("place");  // the toggle is a gesture: the context may start now
  }

  play(name) {
    if (!this.on || !SOUNDS[name]) return;
    const now = performance.now();
    if (name !== "win" && now - this.last < MIN_GAP_MS) return;  // a burst of diffs is not a drum roll
    this.last = now;
    const Context = window.AudioContext || window.webkitAudioContext;
    if (!Context) return;
    this.context ??= new Context();
    const ctx = this.context;
    if (ctx.state === "suspended") ctx.resume().catch(() => {});
    const t0 = ctx.currentTime + 0.01;
    for (const [frequency, start, length] of SOUNDS[name]) {
      const osc = ctx.createOscillator();
      const gain = ctx.createGain();
      osc.type = name === "place" || name === "refused" ? "triangle" : "sine";
      osc.frequency.value = frequency;
      gain.gain.setValueAtTime(0.0001, t0 + start);
      gain.gain.exponentialRampToValueAtTime(0.18, t0 + start + 0.01);
      gain.gain.exponentialRampToValueAtTime(0.0001, t0 + start + length);
      osc.connect(gain).connect(ctx.destination);
      osc.start(t0 + start);
      osc.stop(t0 + start + length + 0.02);
    }
    window.dispatchEvent(new CustomEvent("eightoff-sound", { detail: name }));  // tests hear it
  }
}
