// Words a player reads: card and pile names, and the server's refusals (written for developers,
// "t3-t1 is illegal: wrong suit: 7H does not go onto 8S") turned into the rule in player words
// ("7♥ goes only on 8♥"). Pure functions, no DOM: node's test runner checks them.

export const SUITS = {
  S: { symbol: "♠", name: "spades", red: false },
  H: { symbol: "♥", name: "hearts", red: true },
  D: { symbol: "♦", name: "diamonds", red: true },
  C: { symbol: "♣", name: "clubs", red: false },
};
export const RANK_ORDER = "A23456789TJQK";
const RANK_SHOWN = { T: "10" };
const RANK_NAMES = { A: "ace", T: "10", J: "jack", Q: "queen", K: "king" };

/** "TD" → "10♦": how a card is printed for a player. */
export function cardText(card) {
  return `${RANK_SHOWN[card[0]] ?? card[0]}${SUITS[card[1]].symbol}`;
}

/** "TD" → "10 of diamonds": how a screen reader says it. */
export function cardName(card) {
  return `${RANK_NAMES[card[0]] ?? card[0]} of ${SUITS[card[1]].name}`;
}

/** The rank shown in a card's corner ("10", "Q"). */
export function rankText(card) {
  return RANK_SHOWN[card[0]] ?? card[0];
}

/** "t3" → "column 3", "c2" → "cell 2", "fH" → "the ♥ foundation". */
export function pileText(pile) {
  if (pile[0] === "t") return `column ${pile.slice(1)}`;
  if (pile[0] === "c") return `cell ${pile.slice(1)}`;
  return `the ${SUITS[pile[1]].symbol} foundation`;
}

/** The card one rank higher in the same suit (what a card goes onto in a column), or null for a King. */
function cardAbove(card) {
  const next = RANK_ORDER[RANK_ORDER.indexOf(card[0]) + 1];
  return next ? `${next}${card[1]}` : null;
}

const CARD = "([A2-9TJQK][SHDC])";
const PILE = "(t[1-8]|c[1-8]|f[SHDC])";

/** Each refusal of the engine (engine/game.py) as a pattern and the sentence a player reads. */
const REASONS = [
  [new RegExp(`wrong (?:suit|rank): ${CARD} does not go onto ${CARD}$`), (card) => {
    const above = cardAbove(card);
    return above ? `${cardText(card)} goes only on ${cardText(above)}` : `${cardText(card)} goes only into an empty column`;
  }],
  [new RegExp(`wrong suit: ${CARD} does not go onto f([SHDC])$`), (card) =>
    `${cardText(card)} goes only on the ${SUITS[card[1]].symbol} foundation`],
  [new RegExp(`foundation out of order: f([SHDC]) takes ${CARD} next, not ${CARD}$`), (suit, next) =>
    `The ${SUITS[suit].symbol} foundation takes ${cardText(next)} next`],
  [/foundation out of order: f([SHDC]) is complete$/, (suit) => `The ${SUITS[suit].symbol} foundation is complete`],
  [new RegExp(`only a King goes into an empty column, not ${CARD}$`), () => "Only a King goes into an empty column"],
  [/group too large: (\d+) cards, at most (\d+) with/, (count, limit) =>
    `${count} cards are too many to move at once: ${limit} at most now (free cells and empty columns allow more)`],
  [new RegExp(`${PILE} is occupied$`), (pile) => `${capitalize(pileText(pile))} already holds a card`],
  [/are not a same-suit run$/, () => "Only a run of one suit in order moves together"],
  [new RegExp(`only one card at a time leaves ${PILE}$`), (pile) => `Only one card at a time leaves ${pileText(pile)}`],
  [new RegExp(`double tap: nowhere to put ${CARD} from`), (card) => `${cardText(card)} has nowhere to go`],
  [new RegExp(`${PILE} is empty$`), (pile) => `${capitalize(pileText(pile))} is empty`],
  [new RegExp(`${PILE} cannot move onto itself$`), () => "Drop the card on another pile"],
  [/nothing to undo$/, () => "Nothing to undo"],
  [/only the last (\d+) actions can be undone$/, (limit) => `Only the last ${limit} actions can be undone`],
  [/the game is (won|resigned)$|game \S+ is (?:over|won|resigned)$/, () => "This game is over"],
];

function capitalize(text) {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** The server's refusal in player words; an unknown one keeps its text, with cards printed as cards. */
export function playerReason(message) {
  for (const [pattern, words] of REASONS) {
    const match = pattern.exec(message);
    if (match) return words(...match.slice(1).filter((part) => part !== undefined));
  }
  const text = message.replace(new RegExp(`\\b${CARD}\\b`, "g"), (card) => cardText(card));
  return capitalize(text);
}

/** 754012 → "12:34"; an hour or more → "1:02:03". */
export function formatDuration(ms) {
  const seconds = Math.max(0, Math.floor(ms / 1000));
  const hours = Math.floor(seconds / 3600);
  const minutes = Math.floor((seconds % 3600) / 60);
  const rest = String(seconds % 60).padStart(2, "0");
  return hours ? `${hours}:${String(minutes).padStart(2, "0")}:${rest}` : `${minutes}:${rest}`;
}

/** Why the top cards of a pile cannot be picked up together (board.js liftProblem), in player words. */
export function liftText(cards, problem) {
  if (problem.notRun) {
    const listed = cards.map(cardText);
    const named = `${listed.slice(0, -1).join(", ")} and ${listed.at(-1)}`;
    return `${named} are not a run: only a run of one suit in order moves together`;
  }
  return `${cards.length} cards are too many to move at once: ${problem.limit} at most now (free cells and empty columns allow more)`;
}
