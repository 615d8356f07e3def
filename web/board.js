// The board model: a copy of one game, taken from a `snapshot` and kept exact by applying the ops of
// every `ack` and `diff` (protocol/README.md section 7). It knows no rule of the game and touches no
// DOM, so node's test runner checks it against protocol/vectors/diffs.json.

/** A fresh board from a `snapshot` message (deep copies: the message stays as it came). */
export function boardFromSnapshot(snapshot) {
  return {
    game: snapshot.game,
    v: snapshot.v,
    code: snapshot.code,
    player: snapshot.player,
    startedAt: snapshot.started_at,
    tableau: snapshot.tableau.map((column) => [...column]),
    cells: [...snapshot.cells],
    foundations: { ...snapshot.foundations },
    score: snapshot.score,
    moves: snapshot.moves,
    status: snapshot.status,
  };
}

/** Take `op.cards` off `op.from` and put them on `op.to`. */
export function applyOp(board, op) {
  const count = op.cards.length;
  const [fromKind, fromRest] = [op.from[0], op.from.slice(1)];
  const [toKind, toRest] = [op.to[0], op.to.slice(1)];
  if (fromKind === "t") board.tableau[Number(fromRest) - 1].splice(-count, count);
  else if (fromKind === "c") board.cells[Number(fromRest) - 1] = null;
  else board.foundations[fromRest] = op.top ?? null;
  if (toKind === "t") board.tableau[Number(toRest) - 1].push(...op.cards);
  else if (toKind === "c") board.cells[Number(toRest) - 1] = op.cards[0];
  else board.foundations[toRest] = op.cards[count - 1];
}

/**
 * Apply an `ack` or `diff` of this board's game.
 * Returns "applied", "old" (a version already seen: ignored) or "gap" (a version was missed: the
 * caller asks for a fresh snapshot with `resume` or `watch`).
 */
export function applyChange(board, message) {
  if (message.v <= board.v) return "old";
  if (message.v !== board.v + 1) return "gap";
  for (const op of message.ops) applyOp(board, op);
  board.v = message.v;
  board.score = message.score;
  board.moves = message.moves;
  board.status = message.status;
  return "applied";
}

/** The cards of a pile (`t3`, `c1`, `fH`), bottom first; a foundation shows its top card only. */
export function pileCards(board, pile) {
  const rest = pile.slice(1);
  if (pile[0] === "t") return board.tableau[Number(rest) - 1] ?? [];
  if (pile[0] === "c") {
    const card = board.cells[Number(rest) - 1];
    return card ? [card] : [];
  }
  const top = board.foundations[rest];
  return top ? [top] : [];
}

const RANKS = "A23456789TJQK";

/**
 * Whether the top `n` cards of a column can be picked up together (the rules' "group move"): null
 * when they can, else {notRun: true} (not one suit in descending order) or {limit} (more cards than
 * any move can carry now: (free cells + 1) × 2^(empty columns), docs/rules.md). The server still
 * decides each move; this only keeps a player from lifting what no move could take.
 */
export function liftProblem(board, pile, n) {
  if (n <= 1 || pile[0] !== "t") return null;
  const cards = pileCards(board, pile).slice(-n);
  for (let i = 1; i < cards.length; i += 1) {
    const [lower, upper] = [cards[i - 1], cards[i]];
    if (upper[1] !== lower[1] || RANKS.indexOf(upper[0]) !== RANKS.indexOf(lower[0]) - 1) return { notRun: true };
  }
  const freeCells = board.cells.filter((card) => card === null).length;
  const emptyColumns = board.tableau.filter((column) => column.length === 0).length;
  const limit = (freeCells + 1) * 2 ** emptyColumns;
  return n > limit ? { limit } : null;
}
