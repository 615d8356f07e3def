// The server's clock, as this page estimates it. A game's time is what the server records: its own
// clock at the end minus its own clock at the deal (`started_at`). The machine's clock may be minutes
// off, so the page never reads it for a game's time: it samples the server's clock (GET /api/time,
// or the `started_at` of a game it just dealt), keeps the sample of the shortest round trip (its error
// is at most half that trip), and carries it forward on the monotonic clock (a change of the
// machine's clock mid-game changes nothing). No DOM: node's test runner checks it.

export class ServerClock {
  /** `monotonic()`: milliseconds that only grow (performance.now); `wall()`: the machine's clock, used
   * only until a first sample comes. */
  constructor({ monotonic = () => performance.now(), wall = () => Date.now() } = {}) {
    this.monotonic = monotonic;
    this.wall = wall;
    this.best = null;  // {server, at, trip}: the server's time at monotonic `at`, and that round trip
    this.ready = false;
  }

  /** The server's time now, in epoch milliseconds. */
  now() {
    if (this.best === null) return this.wall();
    return this.best.server + (this.monotonic() - this.best.at);
  }

  /** The server read its clock (`serverMs`) between `sentAt` and `receivedAt` (monotonic). */
  sample(serverMs, sentAt, receivedAt) {
    if (!Number.isFinite(serverMs) || receivedAt < sentAt) return;
    const trip = receivedAt - sentAt;
    if (this.best === null || trip <= this.best.trip) this.best = { server: serverMs, at: (sentAt + receivedAt) / 2, trip };
  }

  /**
   * Sample `read()` (a promise of the server's time in epoch ms) `times` times afresh (another node may
   * answer after a reconnect); the fresh samples replace the old ones once there is one, failures are
   * skipped. `ready` is true after the first sync, even a failed one (then the machine's clock serves).
   */
  async sync(read, times = 3) {
    const fresh = new ServerClock({ monotonic: this.monotonic, wall: this.wall });
    for (let i = 0; i < times; i += 1) {
      const sentAt = this.monotonic();
      let serverMs;
      try {
        serverMs = await read();
      } catch {
        continue;
      }
      fresh.sample(serverMs, sentAt, this.monotonic());
    }
    if (fresh.best !== null) this.best = fresh.best;
    this.ready = true;
  }
}

/** The server's time from GET /api/time ({now: "2026-11-30T04:48:59.123Z"}). */
export async function fetchServerTime() {
  const response = await fetch("/api/time", { cache: "no-store" });
  if (!response.ok) throw new Error(`GET /api/time: ${response.status}`);
  const body = await response.json();
  const ms = Date.parse(body.now);
  if (!Number.isFinite(ms)) throw new Error("GET /api/time: no time");
  return ms;
}
