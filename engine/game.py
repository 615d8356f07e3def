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

from engine.cards import Card, Rank, Suit
from engine.deal import Deal
from engine.errors import IllegalMoveError
from engine.layout import FOUNDATION_ORDER, Layout
from engine.moves import Action, Move, Undo, max_group_size
from engine.piles import COLUMN_COUNT, Cell, Column, Foundation, Pile
from engine.scoring import points_for

__all__ = ["UNDO_LIMIT", "Game", "Status", "Transfer"]

#: How many of the last actions can be undone (the seeds: "the last 100 actions").
UNDO_LIMIT = 100

_COLUMNS = tuple(Column(i) for i in range(1, COLUMN_COUNT + 1))
_FOUNDATIONS = {suit: Foundation(suit) for suit in Suit}


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


@dataclass(frozen=True, slots=True)
class _Played:
    move: Move
    score_before: int


class Game:
    """An Eight Off game from its deal: position, score, moves, undos, version and undo history."""

    def __init__(self, deal: Deal) -> None:
        layout = deal.layout()
        self.deal = deal
        self._columns: list[list[Card]] = [list(column) for column in layout.columns]
        self._cells: list[Card | None] = list(layout.cells)
        self._foundations: dict[Suit, int] = {suit: 0 for suit in Suit}
        self._history: deque[_Played] = deque(maxlen=UNDO_LIMIT)
        self._log: list[Action] = []
        self.status = Status.PLAYING
        self.score = 0
        self.moves = 0
        self.undos = 0
        self.v = 0

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
        foundations = tuple(self._foundations[suit] for suit in FOUNDATION_ORDER)
        return Layout(
            columns=tuple(tuple(column) for column in self._columns),
            cells=tuple(self._cells),
            foundations=foundations,  # type: ignore[arg-type]
        )

    def cards_in(self, pile: Pile) -> tuple[Card, ...]:
        """The cards of ``pile``, bottom first (a foundation is listed from its Ace)."""
        if isinstance(pile, Column):
            return tuple(self._columns[pile.index - 1])
        if isinstance(pile, Cell):
            card = self._cells[pile.index - 1] if pile.index <= len(self._cells) else None
            return (card,) if card else ()
        height = self._foundations[pile.suit]
        return tuple(Card(Rank(rank), pile.suit) for rank in range(1, height + 1))

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
            return f"a move carries at least one card, not {count!r}"
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
                return f"{source} holds {len(column)} card(s), not {count}" if column else f"{source} is empty"
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
        return [Card(Rank(self._foundations[source.suit]), source.suit)]

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
            return f"foundation out of order: {target} takes {Card(Rank(height + 1), target.suit)} next, not {card}"
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
                return (
                    f"group too large: {len(group)} cards, at most {limit} with {empty_cells} empty "
                    f"cell(s) and {empty_columns} empty column(s)"
                )
        return None

    # ----------------------------------------------------------------- legal moves

    @property
    def legal_moves(self) -> LegalMoves:
        """A lazy, set-like view of the legal moves: iterate it, or test ``move in game.legal_moves``."""
        return LegalMoves(self)

    def generate_legal_moves(self) -> Iterator[Move]:
        """Every legal move (undo aside), sources in order columns, cells, foundations."""
        if self.status is not Status.PLAYING:
            return
        empty_cells, empty_columns = self.empty_cells(), self.empty_columns()
        to_column_limit = max_group_size(empty_cells, empty_columns)
        to_empty_limit = max_group_size(empty_cells, empty_columns, into_empty_column=True)
        first_empty_cell = self._first_empty_cell()
        for source, column in zip(_COLUMNS, self._columns):
            if not column:
                continue
            top = column[-1]
            yield from self._single_card_moves(source, top, first_empty_cell)
            run = self._run_length(column)
            for target, other in zip(_COLUMNS, self._columns):
                if other is column:
                    continue
                if other:
                    need = other[-1].rank - top.rank
                    if 2 <= need <= min(run, to_column_limit) and column[-need].suit is other[-1].suit:
                        yield Move(source, target, need)
                elif run >= 2:
                    king_depth = column[-run].rank - top.rank + 1
                    if column[-run].rank is Rank.KING and 2 <= king_depth <= to_empty_limit:
                        yield Move(source, target, king_depth)
        for index, card in enumerate(self._cells, start=1):
            if card is not None:
                yield from self._single_card_moves(Cell(index), card, first_empty_cell)
        for suit, height in self._foundations.items():
            if height:
                yield from self._single_card_moves(_FOUNDATIONS[suit], Card(Rank(height), suit), first_empty_cell)

    def _single_card_moves(self, source: Pile, card: Card, first_empty_cell: int) -> Iterator[Move]:
        if not isinstance(source, Foundation) and self._foundations[card.suit] == card.rank - 1:
            yield Move(source, _FOUNDATIONS[card.suit])
        for target, column in zip(_COLUMNS, self._columns):
            if column:
                top = column[-1]
                if top.suit is card.suit and top.rank == card.rank + 1:
                    yield Move(source, target)
            elif card.rank is Rank.KING and source != target:
                yield Move(source, target)
        if first_empty_cell:
            for index, cell in enumerate(self._cells, start=1):
                if cell is None and Cell(index) != source:
                    yield Move(source, Cell(index))

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

    def _first_empty_cell(self) -> int:
        """1-based index of the first empty cell, 0 when every cell is full."""
        for index, card in enumerate(self._cells, start=1):
            if card is None:
                return index
        return 0

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
        accepting = [target for target, column in zip(_COLUMNS, self._columns) if column and target != source]
        accepting.sort(key=lambda target: -len(self._columns[target.index - 1]))  # stable: leftmost first
        yield from (Move(source, target, count) for target in accepting)
        whole_column = isinstance(source, Column) and len(self._columns[source.index - 1]) == count
        if not whole_column:
            yield from (Move(source, t, count) for t, column in zip(_COLUMNS, self._columns) if not column)
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
        cards = self._take(move.source, move.count)
        self._put(move.target, cards)
        points = points_for(move)
        self._history.append(_Played(move, self.score))
        self._log.append(move)
        self.score += points
        self.moves += 1
        self.v += 1
        if self.is_won():
            self.status = Status.WON
        return Transfer(tuple(cards), move.source, move.target, points)

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
        played = self._history.pop()
        move = played.move
        cards = self._take(move.target, move.count)
        self._put(move.source, cards)
        points = max(0, played.score_before) - self.score
        self.score = max(0, played.score_before)
        self._log.append(Undo())
        self.moves -= 1
        self.undos += 1
        self.v += 1
        return Transfer(tuple(cards), move.target, move.source, points)

    def peek(self) -> Move | None:
        """The move an undo would take back, or None."""
        return self._history[-1].move if self._history else None

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
        return [Card(Rank(height), pile.suit)]

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
            self.status, self.score, self.moves, self.undos, self.v,
        )
        return twin

    def __repr__(self) -> str:
        return f"<Game {self.deal.code()} v={self.v} score={self.score} moves={self.moves} {self.status.value}>"


class LegalMoves:
    """Set-like view of a game's legal moves; ``in`` checks one move without generating the rest."""

    def __init__(self, game: Game) -> None:
        self._game = game

    def __iter__(self) -> Iterator[Move]:
        return self._game.generate_legal_moves()

    def __contains__(self, move: object) -> bool:
        return isinstance(move, Move) and self._game.is_legal(move)

    def __bool__(self) -> bool:
        return any(True for _ in self)

    def count(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"<LegalMoves ({', '.join(map(str, self))})>"
