// A short win celebration: card suits fall over the board for under three seconds, beneath the result
// panel (never over it) and through to nothing (they take no pointer events). With reduced motion the
// panel only glows for a moment.
//
// confetti() is pure (tests/web/celebrate.test.mjs runs it under node).

export const CELEBRATION_MS = 2600;
const SYMBOLS = ["♠", "♥", "♦", "♣"];

/** `count` pieces: where each starts (% of the width), when and how long it falls, its suit, its turn;
 * the same `seed` gives the same pieces. Every piece has landed by CELEBRATION_MS. */
export function confetti(count, seed = 1) {
  let state = seed >>> 0 || 1;
  const random = () => {
    state ^= state << 13; state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5; state >>>= 0;
    return state / 2 ** 32;
  };
  return Array.from({ length: count }, (_, i) => {
    const delay = Math.round(random() * 700);
    return {
      left: Math.round(random() * 96 * 10) / 10,
      delay,
      duration: Math.round(1200 + random() * (CELEBRATION_MS - 1300 - delay)),
      symbol: SYMBOLS[i % SYMBOLS.length],
      turn: Math.round((random() - 0.5) * 720),
    };
  });
}

let running = null;  // {layer, timer} of the celebration on screen

/** Stop a celebration under way (a new game, another board). */
export function stopCelebration() {
  if (!running) return;
  clearTimeout(running.timer);
  running.layer.remove();
  running.panel.classList.remove("celebrating");
  running = null;
}

/** Celebrate a win in `wrap` (the element holding the board and `panel`, the result). */
export function celebrate(wrap, panel) {
  stopCelebration();
  const layer = document.createElement("div");
  layer.className = "celebration";
  layer.setAttribute("aria-hidden", "true");
  panel.classList.add("celebrating");
  if (!window.matchMedia("(prefers-reduced-motion: reduce)").matches) {
    const height = wrap.clientHeight;
    for (const piece of confetti(36, Date.now())) {
      const node = document.createElement("span");
      node.textContent = piece.symbol;
      node.className = piece.symbol === "♥" || piece.symbol === "♦" ? "red" : "";
      node.style.left = `${piece.left}%`;
      layer.append(node);
      node.animate(
        [
          { transform: "translateY(-2rem) rotate(0deg)", opacity: 1 },
          { transform: `translateY(${height}px) rotate(${piece.turn}deg)`, opacity: 0 },
        ],
        { duration: piece.duration, delay: piece.delay, easing: "cubic-bezier(0.3, 0.1, 0.7, 1)", fill: "both" },
      );
    }
  }
  wrap.append(layer);
  running = { layer, panel, timer: setTimeout(stopCelebration, CELEBRATION_MS) };
}
