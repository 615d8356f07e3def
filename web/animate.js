// Moves animated from where they come from: after a redraw, each card drawn somewhere else than before
// flies there from where it was (a move, a spectator's diff, an undo, a drop from the drag ghost).
//
// Taps are never read from the picture in flight. The card itself is at once where the server says,
// only transparent (so a tap there lands on it, as the board now is); what flies is a copy that takes no
// pointer events, so a tap on the old place lands on what is really there now (a second tap of a double
// tap is then recognised by its pile, web/input.js). No animation can put a card under a finger that the
// board does not have there. A new redraw lands every flight at once.
//
// The first part is pure (tests/web/animate.test.mjs runs it under node).

export const FLIGHT_MIN_MS = 240;
export const FLIGHT_MAX_MS = 360;
const MS_PER_PX = 0.25;
/** Redraws closer together than this (a burst of diffs: a fast game watched) are drawn without flights. */
export const BURST_MS = 150;

/** How long a card takes from `from` to `to` (rects): farther is a little longer, within bounds. */
export function flightMs(from, to) {
  const distance = Math.hypot(from.left - to.left, from.top - to.top);
  return Math.round(Math.min(FLIGHT_MAX_MS, FLIGHT_MIN_MS + distance * MS_PER_PX));
}

/**
 * The flights of a redraw: for each card drawn now (`after`: card -> rect) that was drawn elsewhere
 * before (`before`), {card, from, to}. Cards new to the board, and cards that stayed, do not fly.
 */
export function flightsBetween(before, after) {
  const flights = [];
  for (const [card, to] of after) {
    const from = before.get(card);
    if (!from) continue;
    if (Math.abs(from.left - to.left) < 1 && Math.abs(from.top - to.top) < 1) continue;
    flights.push({ card, from, to });
  }
  return flights;
}

/** Whether a redraw at `now` comes so soon after the one at `last` that it is part of a burst. */
export function inBurst(now, last) {
  return now - last < BURST_MS;
}

// The DOM part ----------------------------------------------------------------------------------------

/** Where each card is drawn now; a dragged card is where its ghost is (added last, so it wins). */
export function cardRects(root = document) {
  const rects = new Map();
  for (const node of root.querySelectorAll("[data-card]")) {
    if (!node.closest(".flyer")) rects.set(node.dataset.card, node.getBoundingClientRect());
  }
  return rects;
}

let flying = [];          // [{flyer, node, animation}] of the flights under way
let lastRedraw = -Infinity;

function reducedMotion() {
  return window.matchMedia("(prefers-reduced-motion: reduce)").matches;
}

/** Land every flight under way: its card shows where it is, the copy goes. */
export function landAll() {
  for (const flight of flying) {
    flight.animation.cancel();
    flight.flyer.remove();
    flight.node.classList.remove("landing");
  }
  flying = [];
}

/** After a redraw of `board` (an element), fly its moved cards from `before` (cardRects before it). */
export function flyFrom(before, board) {
  landAll();
  const now = performance.now();
  const burst = inBurst(now, lastRedraw);
  lastRedraw = now;
  if (burst || reducedMotion()) return;
  const style = getComputedStyle(board);
  const sizes = ["--card-w", "--card-h"].map((name) => [name, style.getPropertyValue(name)]);
  const nodes = new Map();
  for (const node of board.querySelectorAll("[data-card]")) nodes.set(node.dataset.card, node);
  const after = new Map([...nodes].map(([card, node]) => [card, node.getBoundingClientRect()]));
  for (const { card, from, to } of flightsBetween(before, after)) {
    const node = nodes.get(card);
    const flyer = document.createElement("div");
    flyer.className = "flyer";
    flyer.setAttribute("aria-hidden", "true");
    Object.assign(flyer.style, { left: `${to.left}px`, top: `${to.top}px`, width: `${to.width}px`, height: `${to.height}px` });
    for (const [name, value] of sizes) flyer.style.setProperty(name, value);  // the board's card size (phones)
    const copy = node.cloneNode(true);
    copy.removeAttribute("id");
    copy.tabIndex = -1;
    copy.classList.remove("selected", "hint", "lifted");
    flyer.append(copy);
    document.body.append(flyer);
    node.classList.add("landing");
    const animation = flyer.animate(
      [{ transform: `translate(${from.left - to.left}px, ${from.top - to.top}px)` }, { transform: "none" }],
      { duration: flightMs(from, to), easing: "cubic-bezier(0.2, 0.7, 0.3, 1)" },
    );
    const flight = { flyer, node, animation };
    animation.onfinish = () => {
      flyer.remove();
      node.classList.remove("landing");
      flying = flying.filter((each) => each !== flight);
    };
    flying.push(flight);
  }
}
