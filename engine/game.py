"""Game: the one mutable owner of an Eight Off position, its score, counters and undo history.

Validate-then-apply lives at one boundary: ``play()`` checks an action and raises ``IllegalMoveError``
with the rule that refused it; ``push()`` applies a move it trusts. Undo replays a move's inverse
(every move is reversible card for card) and restores the score the action had before.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import TypeAlias

from engine.cards import ALL_CARDS, SHUFFLE_ORDER, Card, Rank, Suit
from engine.deal import CELL_VARIANTS, Deal
from engine.errors import EngineError, IllegalMoveError, quoted
from engine.layout import FOUNDATION_ORDER, Layout
from engine.moves import UNDO, Action, Move, Undo, max_group_size
from engine.piles import COLUMN_COUNT, MAX_CELLS, PILES, Cell, Column, Foundation, Pile
from engine.scoring import points_for

__all__ = ["UNDO_LIMIT", "Game", "Status", "Transfer"]

#: How many of the last actions can be undone (the seeds: "the last 100 actions").
UNDO_LIMIT = 100

_COLUMNS = tuple(Column(i) for i in range(1, COLUMN_COUNT + 1))
_FOUNDATIONS = {suit: Foundation(suit) for suit in Suit}
_KING = Rank.KING

# Tables for the move generator. Piles have ids, their index in PILES: columns 0..7, cells 8..15,
# foundations 16..19 (in FOUNDATION_ORDER); _MOVES[source id][target id][count - 1] is the (shared,
# frozen) Move.
_CELL_IDS = tuple(range(COLUMN_COUNT, COLUMN_COUNT + MAX_CELLS))
_FOUNDATION_IDS = {suit: COLUMN_COUNT + MAX_CELLS + n for n, suit in enumerate(FOUNDATION_ORDER)}
_MOVES: tuple[tuple[tuple[Move, ...], ...], ...] = tuple(
    tuple(tuple(Move(source, target, count) for count in range(1, 14)) for target in PILES)
    for source in PILES
)
_PILE_IDS: dict[Pile, int] = {pile: index for index, pile in enumerate(PILES)}
#: _MOVES flat: the move of id ``(source id * len(PILES) + target id) * 13 + count - 1`` (`_move_id`).
_FLAT_MOVES: tuple[Move, ...] = tuple(move for row in _MOVES for moves in row for move in moves)
#: _CARDS[suit][rank]: the card (index 0 unused); _BELOW[card]: the card one rank lower of its suit.
_CARDS: dict[Suit, tuple[Card, ...]] = {
    suit: (SHUFFLE_ORDER[0], *(card for card in SHUFFLE_ORDER if card.suit is suit)) for suit in Suit
}
_BELOW: dict[Card, Card] = {card: _CARDS[card.suit][card.rank - 1] for card in SHUFFLE_ORDER if card.rank > 1}


class Status(Enum):
    """Where a game stands; a loss is never announced (the player undoes or resigns)."""

    PLAYING = "playing"
    WON = "won"
    RESIGNED = "resigned"


@dataclass(frozen=True, slots=True)
class Transfer:
    """What one applied action did to the table: ``cards`` (bottom first) went ``source`` → ``target``.

    For an undo this is the inverse of the undone move. ``points`` is the score change.
    """

    cards: tuple[Card, ...]
    source: Pile
    target: Pile
    points: int


#: An undo history entry: the move's id (`_move_id`) and the score before it.
_Played: TypeAlias = tuple[int, int]


def _move_id(move: Move) -> int:
    """The id of a legal ``move`` in `_FLAT_MOVES`. A game keeps ids and shared moves, not the
    caller's Move: every Move, and every tuple holding one, is an object the garbage collector tracks,
    and each full pass of it stalls the event loop for as long as it takes; moves parsed one by one
    made the passes grow with the length of every game in memory (a tuple of two ints is not
    tracked)."""
    return (_PILE_IDS[move.source] * len(PILES) + _PILE_IDS[move.target]) * 13 + move.count - 1


class Game:
    """An Eight Off game from its deal: position, score, moves, undos, version and undo history."""

    def __init__(self, deal: Deal) -> None:
        self._start(deal, deal.layout())

    def _start(self, deal: Deal, layout: Layout) -> None:
        """Every field of a game that starts at ``layout``: counters at 0, no history."""
        self.deal = deal
        self._columns: list[list[Card]] = [list(column) for column in layout.columns]
        self._cells: list[Card | None] = list(layout.cells)
        self._foundations: dict[Suit, int] = dict(zip(FOUNDATION_ORDER, layout.foundations, strict=True))
        self._history: deque[_Played] = deque(maxlen=UNDO_LIMIT)
        self._log: list[Action] = []
        self.score = 0
        self.moves = 0
        self.undos = 0
        self.v = 0
        self.status = Status.WON if self.is_won() else Status.PLAYING

    # ----------------------------------------------------------------- constructors and views

    @classmethod
    def from_code(cls, code: str) -> Game:
        """A new game of the deal ``code``; raises ``InvalidCodeError`` for a bad code."""
        return cls(Deal.from_code(code))

    @classmethod
    def replay(cls, deal: Deal, actions: Iterable[Action]) -> Game:
        """Rebuild a game from its deal and action log, checking every action.

        Raises:
            IllegalMoveError: an action of the log is illegal where it stands.
        """
        game = cls(deal)
        for action in actions:
            game.play(action)
        return game

    @classmethod
    def from_layout(cls, layout: Layout, deal: Deal | None = None) -> Game:
        """A new game starting from an arbitrary position, for tests and tools.

        The layout must hold each of the 52 cards exactly once (a foundation of height h holds its
        suit's A..h), in 8 columns and 8, 4 or 2 cells. ``deal`` is only recorded as the game's deal
        (its code, its repr); it defaults to deal 0 of the layout's cell variant and must have the same
        cell count. Counters start at 0 with an empty undo history; the status is WON when every card
        is on the foundations. ``Game.replay`` starts from the deal's opening layout, so the log of
        such a game replays only when the layout is that opening layout.

        Raises:
            EngineError: the layout is not a position of Eight Off.
        """
        columns, cells, foundations = layout.columns, layout.cells, layout.foundations
        if len(columns) != COLUMN_COUNT:
            raise EngineError(f"a layout has {COLUMN_COUNT} columns, not {len(columns)}")
        if len(cells) not in CELL_VARIANTS:
            raise EngineError(f"a layout has 8, 4 or 2 cells, not {len(cells)}")
        if len(foundations) != len(FOUNDATION_ORDER) or any(
            type(height) is not int or not 0 <= height <= 13 for height in foundations
        ):
            raise EngineError(f"foundation heights must be four numbers 0..13, not {foundations!r}")
        cards = [card for column in columns for card in column] + [card for card in cells if card]
        for suit, height in zip(FOUNDATION_ORDER, foundations, strict=True):
            cards += _CARDS[suit][1 : height + 1]
        if any(not isinstance(card, Card) for card in cards):
            raise EngineError("a layout holds Card values only")
        if len(cards) != len(ALL_CARDS) or set(cards) != ALL_CARDS:
            missing = sorted(map(str, ALL_CARDS - set(cards)))
            repeated = sorted({str(card) for card in cards if cards.count(card) > 1})
            raise EngineError(
                f"a layout holds the 52 cards once each: missing {missing}, repeated {repeated}"
            )
        if deal is None:
            deal = Deal(0, len(cells))
        elif deal.cells != len(cells):
            raise EngineError(f"{deal} has {deal.cells} cells, the layout {len(cells)}")
        game = cls.__new__(cls)
        game._start(deal, layout)
        return game

    @property
    def cell_count(self) -> int:
        return len(self._cells)

    @property
    def log(self) -> tuple[Action, ...]:
        """Every action applied since the deal, undos included, in order (``len(log) == v``)."""
        return tuple(self._log)

    @property
    def undo_depth(self) -> int:
        """How many actions can be undone right now (at most ``UNDO_LIMIT``)."""
        return len(self._history)

    def layout(self) -> Layout:
        """An immutable picture of the table."""
        heights = [int(self._foundations[suit]) for suit in FOUNDATION_ORDER]  # ints, not Ranks
        return Layout(
            columns=tuple(tuple(column) for column in self._columns),
            cells=tuple(self._cells),
            foundations=(heights[0], heights[1], heights[2], heights[3]),
        )

    def cards_in(self, pile: Pile) -> tuple[Card, ...]:
        """The cards of ``pile``, bottom first (a foundation is listed from its Ace)."""
        if isinstance(pile, Column):
            return tuple(self._columns[pile.index - 1])
        if isinstance(pile, Cell):
            card = self._cells[pile.index - 1] if pile.index <= len(self._cells) else None
            return (card,) if card else ()
        return _CARDS[pile.suit][1 : self._foundations[pile.suit] + 1]

    def top_card(self, pile: Pile) -> Card | None:
        """The card a move from ``pile`` would take, or None for an empty pile."""
        cards = self.cards_in(pile) if not isinstance(pile, Column) else self._columns[pile.index - 1]
        return cards[-1] if cards else None

    def is_won(self) -> bool:
        """All 52 cards are on the foundations."""
        return all(height == 13 for height in self._foundations.values())

    def is_over(self) -> bool:
        return self.status is not Status.PLAYING

    def empty_cells(self) -> int:
        return self._cells.count(None)

    def empty_columns(self) -> int:
        return sum(1 for column in self._columns if not column)

    # ----------------------------------------------------------------- legality

    def illegal_reason(self, move: Move) -> str | None:
        """Why ``move`` is illegal here, or None when it is legal."""
        if self.status is not Status.PLAYING:
            return f"the game is {self.status.value}"
        source, target, count = move.source, move.target, move.count
        if source == target:
            return f"{source} cannot move onto itself"
        if type(count) is not int or count < 1:
            return f"a move carries at least one card, not {quoted(count)}"
        reason = self._source_reason(source, count)
        if reason:
            return reason
        group = self._group(source, count)
        if isinstance(target, Foundation):
            return self._foundation_reason(group, target)
        if isinstance(target, Cell):
            return self._cell_reason(group, target)
        return self._column_reason(group, target)

    def is_legal(self, move: Move) -> bool:
        return self.illegal_reason(move) is None

    def _source_reason(self, source: Pile, count: int) -> str | None:
        if isinstance(source, Column):
            column = self._columns[source.index - 1]
            if len(column) < count:
                if not column:
                    return f"{source} is empty"
                return f"{source} holds {len(column)} card(s), not {count}"
            if count > 1 and self._run_length(column) < count:
                return f"the top {count} cards of {source} are not a same-suit run"
            return None
        if isinstance(source, Cell):
            if source.index > len(self._cells):
                return f"there is no {source} with {len(self._cells)} cells"
            if self._cells[source.index - 1] is None:
                return f"{source} is empty"
        elif not self._foundations[source.suit]:
            return f"{source} is empty"
        if count != 1:
            return f"only one card at a time leaves {source}"
        return None

    def _group(self, source: Pile, count: int) -> list[Card]:
        if isinstance(source, Column):
            return self._columns[source.index - 1][-count:]
        if isinstance(source, Cell):
            card = self._cells[source.index - 1]
            assert card is not None  # checked by _source_reason
            return [card]
        return [_CARDS[source.suit][self._foundations[source.suit]]]

    def _foundation_reason(self, group: list[Card], target: Foundation) -> str | None:
        if len(group) != 1:
            return "only one card at a time goes onto a foundation"
        card = group[0]
        if card.suit is not target.suit:
            return f"wrong suit: {card} does not go onto {target}"
        height = self._foundations[target.suit]
        if card.rank != height + 1:
            if height == 13:
                return f"foundation out of order: {target} is complete"
            after = _CARDS[target.suit][height + 1]
            return f"foundation out of order: {target} takes {after} next, not {card}"
        return None

    def _cell_reason(self, group: list[Card], target: Cell) -> str | None:
        if target.index > len(self._cells):
            return f"there is no {target} with {len(self._cells)} cells"
        if len(group) != 1:
            return "a cell holds one card"
        if self._cells[target.index - 1] is not None:
            return f"{target} is occupied"
        return None

    def _column_reason(self, group: list[Card], target: Column) -> str | None:
        base = group[0]
        column = self._columns[target.index - 1]
        if column:
            top = column[-1]
            if top.suit is not base.suit:
                return f"wrong suit: {base} does not go onto {top}"
            if top.rank != base.rank + 1:
                return f"wrong rank: {base} does not go onto {top}"
        elif base.rank is not Rank.KING:
            return f"only a King goes into an empty column, not {base}"
        if len(group) > 1:
            empty_cells, empty_columns = self.empty_cells(), self.empty_columns()
            limit = max_group_size(empty_cells, empty_columns, into_empty_column=not column)
            if len(group) > limit:
                # Into an empty column the destination is not counted (max_group_size): nor here.
                counted = f"{empty_columns} empty column(s)"
                if not column:
                    counted = f"{empty_columns - 1} empty column(s) besides {target}, the destination"
                return (
                    f"group too large: {len(group)} cards, at most {limit} with {empty_cells} empty cell(s) "
                    f"and {counted}"
                )
        return None

    # ----------------------------------------------------------------- legal moves

    @property
    def legal_moves(self) -> LegalMoves:
        """A lazy, set-like view of the legal moves: iterate it, or test ``move in game.legal_moves``."""
        return LegalMoves(self)

    def generate_legal_moves(self) -> Iterator[Move]:
        """Every legal move (undo aside), sources in order columns, cells, foundations.

        For each source: its foundation, then columns left to right, then cells; a column's group
        moves follow its single-card moves.
        """
        return iter(self._legal_move_list())

    def _legal_move_list(self) -> list[Move]:
        if self.status is not Status.PLAYING:
            return []
        columns, cells, foundations = self._columns, self._cells, self._foundations
        # takes[card] = the column (its id) whose top card accepts ``card``; there is at most one.
        takes: dict[Card, int] = {}
        empty_columns: list[int] = []
        for target, column in enumerate(columns):
            if column:
                below = _BELOW.get(column[-1])
                if below is not None:
                    takes[below] = target
            else:
                empty_columns.append(target)
        free_cells = [_CELL_IDS[index] for index, card in enumerate(cells) if card is None]
        usable = len(free_cells) + 1
        to_column_limit = usable << len(empty_columns)
        to_empty_limit = usable << max(len(empty_columns) - 1, 0)
        moves: list[Move] = []
        add = moves.append

        def single(row: tuple[tuple[Move, ...], ...], card: Card) -> None:
            target = takes.get(card)
            if target is not None:
                add(row[target][0])
            elif card.rank is _KING:
                for target in empty_columns:
                    add(row[target][0])
            for target in free_cells:
                add(row[target][0])

        for source, column in enumerate(columns):
            if not column:
                continue
            top = column[-1]
            row = _MOVES[source]
            suit = top.suit
            if foundations[suit] == top.rank - 1:
                add(row[_FOUNDATION_IDS[suit]][0])
            single(row, top)
            if len(column) < 2 or _BELOW.get(column[-2]) != top:
                continue
            run = self._run_length(column)
            on_column = min(run, to_column_limit)
            king_run = column[-run].rank is _KING and run <= to_empty_limit
            for target, other in enumerate(columns):
                if target == source:
                    continue
                if other:
                    under = other[-1]
                    need = under.rank - top.rank
                    if 2 <= need <= on_column and under.suit is suit:
                        add(row[target][need - 1])
                elif king_run:
                    add(row[target][run - 1])
        for index, card in enumerate(cells):
            if card is not None:
                row = _MOVES[_CELL_IDS[index]]
                if foundations[card.suit] == card.rank - 1:
                    add(row[_FOUNDATION_IDS[card.suit]][0])
                single(row, card)
        for suit, height in foundations.items():
            if height:
                single(_MOVES[_FOUNDATION_IDS[suit]], _CARDS[suit][height])
        return moves

    @staticmethod
    def _run_length(column: list[Card]) -> int:
        """How many cards on top of a non-empty column form a same-suit descending run."""
        length = 1
        for index in range(len(column) - 1, 0, -1):
            upper, lower = column[index], column[index - 1]
            if upper.suit is not lower.suit or upper.rank != lower.rank - 1:
                break
            length += 1
        return length

    # ----------------------------------------------------------------- tap and double tap

    def tap_move(self, source: Pile) -> Move:
        """The move a tap on ``source``'s top card makes: to its foundation, when legal.

        Raises:
            IllegalMoveError: not a column or cell, empty, or the foundation does not take the card.
        """
        self._check_tappable(source)
        card = self.top_card(source)
        assert card is not None
        move = Move(source, _FOUNDATIONS[card.suit])
        self._check(move)
        return move

    def double_tap_move(self, source: Pile, count: int = 1) -> Move:
        """The move a double tap makes on the card ``count``-th from the top of ``source``.

        Tries, in order: its foundation (a single card); the longest column that accepts it, the
        leftmost on a tie; the leftmost empty column (a King with the run above it); the first empty
        cell (a single card). A King already at the bottom of its column is not moved to another empty
        column, and a cell's card is not moved to another cell: neither would change the position.

        Raises:
            IllegalMoveError: the source cannot be tapped, or no target takes the card.
        """
        self._check_tappable(source)
        if type(count) is not int or count < 1:
            raise IllegalMoveError(f"a double tap moves at least one card, not {quoted(count)}")
        reason = self._source_reason(source, count)
        if reason:
            raise IllegalMoveError(reason)
        for move in self._double_tap_candidates(source, count):
            if self.illegal_reason(move) is None:
                return move
        base = self._group(source, count)[0]
        raise IllegalMoveError(f"double tap: nowhere to put {base} from {source}")

    def _double_tap_candidates(self, source: Pile, count: int) -> Iterator[Move]:
        if count == 1:
            yield Move(source, _FOUNDATIONS[self._group(source, 1)[0].suit])
        columns = self._columns
        accepting = [target for target in _COLUMNS if columns[target.index - 1] and target != source]
        accepting.sort(key=lambda target: -len(columns[target.index - 1]))  # stable: leftmost first
        yield from (Move(source, target, count) for target in accepting)
        whole_column = isinstance(source, Column) and len(columns[source.index - 1]) == count
        if not whole_column:
            yield from (Move(source, target, count) for target in _COLUMNS if not columns[target.index - 1])
        if count == 1 and not isinstance(source, Cell):
            yield from (Move(source, Cell(i)) for i in range(1, len(self._cells) + 1))

    def _check_tappable(self, source: Pile) -> None:
        if self.status is not Status.PLAYING:
            raise IllegalMoveError(f"the game is {self.status.value}")
        if isinstance(source, Foundation):
            raise IllegalMoveError(f"tap a column or a cell, not {source}")
        reason = self._source_reason(source, 1)
        if reason:
            raise IllegalMoveError(reason)

    # ----------------------------------------------------------------- applying actions

    def play(self, action: Action) -> Transfer:
        """Check ``action`` and apply it.

        Raises:
            IllegalMoveError: the rules refuse it; the game is unchanged.
        """
        if isinstance(action, Undo):
            return self.pop()
        self._check(action)
        return self.push(action)

    def _check(self, move: Move) -> None:
        reason = self.illegal_reason(move)
        if reason is not None:
            raise IllegalMoveError(f"{move} is illegal: {reason}")

    def push(self, move: Move) -> Transfer:
        """Apply ``move`` without checking it.

        .. warning:: the move must be legal (``is_legal``); use ``play()`` for untrusted moves.
        """
        source, target = move.source, move.target
        cards = self._take(source, move.count)
        self._put(target, cards)
        points = points_for(move)
        move_id = _move_id(move)
        self._history.append((move_id, self.score))
        self._log.append(_FLAT_MOVES[move_id])
        self.score += points
        self.moves += 1
        self.v += 1
        # only a card put on a foundation can complete the game
        if type(target) is Foundation and self._foundations[target.suit] == 13 and self.is_won():
            self.status = Status.WON
        return Transfer(tuple(cards), source, target, points)

    def pop(self) -> Transfer:
        """Undo the last action still in the undo history.

        Raises:
            IllegalMoveError: the game is over, nothing was played, or the last ``UNDO_LIMIT`` actions
                have already been undone.
        """
        if self.status is not Status.PLAYING:
            raise IllegalMoveError(f"undo is illegal: the game is {self.status.value}")
        if not self._history:
            if self.moves:
                raise IllegalMoveError(f"undo is illegal: only the last {UNDO_LIMIT} actions can be undone")
            raise IllegalMoveError("undo is illegal: nothing to undo")
        move_id, score_before = self._history.pop()
        move = _FLAT_MOVES[move_id]
        cards = self._take(move.target, move.count)
        self._put(move.source, cards)
        score = max(0, score_before)
        points = score - self.score
        self.score = score
        self._log.append(UNDO)
        self.moves -= 1
        self.undos += 1
        self.v += 1
        return Transfer(tuple(cards), move.target, move.source, points)

    def peek(self) -> Move | None:
        """The move an undo would take back, or None."""
        return _FLAT_MOVES[self._history[-1][0]] if self._history else None

    def resign(self) -> None:
        """End the game as resigned; later actions are refused."""
        if self.status is not Status.PLAYING:
            raise IllegalMoveError(f"resign is illegal: the game is {self.status.value}")
        self.status = Status.RESIGNED

    def _take(self, pile: Pile, count: int) -> list[Card]:
        if isinstance(pile, Column):
            column = self._columns[pile.index - 1]
            cards = column[-count:]
            del column[-count:]
            return cards
        if isinstance(pile, Cell):
            card = self._cells[pile.index - 1]
            self._cells[pile.index - 1] = None
            assert card is not None
            return [card]
        height = self._foundations[pile.suit]
        self._foundations[pile.suit] = height - 1
        return [_CARDS[pile.suit][height]]

    def _put(self, pile: Pile, cards: list[Card]) -> None:
        if isinstance(pile, Column):
            self._columns[pile.index - 1].extend(cards)
        elif isinstance(pile, Cell):
            self._cells[pile.index - 1] = cards[0]
        else:
            self._foundations[pile.suit] = cards[0].rank

    # ----------------------------------------------------------------- comparison and copies

    def state_key(self) -> tuple[object, ...]:
        """Everything that makes two games identical: deal, table, status, counters, undo history."""
        return (
            self.deal,
            self.layout(),
            self.status,
            self.score,
            self.moves,
            self.undos,
            self.v,
            tuple(self._history),
            self._history.maxlen,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Game):
            return NotImplemented
        return self.state_key() == other.state_key() and self._log == other._log

    __hash__ = None  # type: ignore[assignment]

    def copy(self) -> Game:
        """An independent copy with the same history."""
        twin = Game.__new__(Game)
        twin.deal = self.deal
        twin._columns = [list(column) for column in self._columns]
        twin._cells = list(self._cells)
        twin._foundations = dict(self._foundations)
        twin._history = deque(self._history, maxlen=UNDO_LIMIT)
        twin._log = list(self._log)
        twin.status, twin.score, twin.moves, twin.undos, twin.v = (
            self.status,
            self.score,
            self.moves,
            self.undos,
            self.v,
        )
        return twin

    def __repr__(self) -> str:
        return (
            f"<Game {self.deal.code()} v={self.v} score={self.score} moves={self.moves} {self.status.value}>"
        )


class LegalMoves:
    """Set-like view of a game's legal moves; ``in`` checks one move without generating the rest."""

    def __init__(self, game: Game) -> None:
        self._game = game

    def __iter__(self) -> Iterator[Move]:
        return self._game.generate_legal_moves()

    def __contains__(self, move: object) -> bool:
        return isinstance(move, Move) and self._game.is_legal(move)

    def __bool__(self) -> bool:
        return bool(self._game._legal_move_list())

    def count(self) -> int:
        return len(self._game._legal_move_list())

    def __repr__(self) -> str:
        return f"<LegalMoves ({', '.join(map(str, self))})>"
