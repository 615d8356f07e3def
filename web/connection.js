// The connection: one WebSocket speaking eightoff.v1.json (protocol/README.md), reconnecting with
// backoff. Every request gets a fresh id and a promise of its reply; every message (replies and
// pushes) also goes to `onMessage`, with the request it answers; `onPending` hears each change of the
// number of requests awaiting their reply.

const SUBPROTOCOL = "eightoff.v1.json";

export class Connection {
  constructor({ onMessage, onStatus, onPending = () => {} }) {
    this.onMessage = onMessage;
    this.onStatus = onStatus;
    this.onPending = onPending;
    this.ws = null;
    this.nextId = 1;
    this.pending = new Map();   // request id -> {type, fields, resolve}
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
      if (request) {
        this.pending.delete(message.id);
        this.onPending(this.pending.size);
        request.resolve(message);
      }
    });
    ws.addEventListener("close", () => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.dropPending();
      this.onStatus("closed");
      setTimeout(() => this.connect(), this.retryDelay);
      this.retryDelay = Math.min(this.retryDelay * 2, 10000);
    });
  }

  /** Start over on a fresh connection at once (a new `hello` follows from onStatus("open")). */
  reconnect() {
    const old = this.ws;
    this.ws = null;
    this.dropPending();
    if (old) old.close();
    this.connect();
  }

  dropPending() {
    for (const request of this.pending.values()) request.resolve(null);  // no reply will ever come
    this.pending.clear();
    this.onPending(0);
  }

  get isOpen() {
    return this.ws !== null && this.ws.readyState === WebSocket.OPEN;
  }

  /**
   * Send a request; fields that are undefined or null are left out (the server refuses null).
   * Returns a promise of its reply (null when the connection is lost first), or null when not open.
   */
  request(type, fields = {}) {
    if (!this.isOpen) return null;
    const id = this.nextId++;
    const message = { type, id };
    for (const [key, value] of Object.entries(fields)) {
      if (value !== undefined && value !== null) message[key] = value;
    }
    const reply = new Promise((resolve) => this.pending.set(id, { type, fields, resolve }));
    this.onPending(this.pending.size);
    this.ws.send(JSON.stringify(message));
    return reply;
  }
}
