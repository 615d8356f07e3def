"""Properties of random lines of play (hypothesis chooses the deal, the variant and every action)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st

from engine import (
    ALL_CARDS,
    UNDO,
    UNDO_LIMIT,
    Action,
    Cell,
    Column,
    Deal,
    Foundation,
    Game,
    IllegalMoveError,
    Move,
    Pile,
    Undo,
    parse_action,
)

STEPS = 60  # below UNDO_LIMIT, so that every move of a line can still be undone
assert STEPS < UNDO_LIMIT

deals = st.builds(Deal, st.integers(0, 2**35 - 1), st.sampled_from([8, 4, 2]))


def fields(game: Game) -> tuple[object, ...]:
    """``state_key()`` without the fields an undo moves forward (undos, v) or that only grow (log):
    deal, layout, status, score, moves, undo history."""
    key = game.state_key()
    return key[:5] + key[7:]


def check_cards(game: Game) -> None:
    cards = list(game.layout().cards())
    assert len(cards) == 52
    assert set(cards) == ALL_CARDS


def check_transfer(game: Game, move: Move, cards: tuple[object, ...]) -> None:
    """The cards a move reports are the ones now on top of its target."""
    assert len(cards) == move.count
    if isinstance(move.target, Foundation):
        assert game.top_card(move.target) == cards[-1]
    else:
        assert game.cards_in(move.target)[-move.count :] == cards


def play_random_moves(game: Game, data: st.DataObject, most: int) -> None:
    """Play up to ``most`` random legal moves (fewer if the game gets stuck)."""
    for _ in range(data.draw(st.integers(0, most), label="length")):
        moves = list(game.legal_moves)
        if not moves:
            break
        game.play(data.draw(st.sampled_from(moves), label="move"))


@given(deals, st.data())
def test_random_play_keeps_every_invariant(deal: Deal, data: st.DataObject) -> None:
    game = Game(deal)
    before_moves: list[tuple[object, ...]] = []  # fields() before each move still undoable
    check_cards(game)
    for _ in range(STEPS):
        moves = list(game.legal_moves)
        options: list[Action] = [*moves, *([UNDO] if game.undo_depth else [])]
        if not options:
            break
        action = data.draw(st.sampled_from(options), label="action")
        undos, v, log, before = game.undos, game.v, game.log, fields(game)
        transfer = game.play(action)
        assert game.v == v + 1
        assert game.log == (*log, action)
        if isinstance(action, Undo):
            # the exact state before the undone move; only undos and v move forward
            assert fields(game) == before_moves.pop()
            assert game.undos == undos + 1
        else:
            before_moves.append(before)
            check_transfer(game, action, transfer.cards)
            assert game.undos == undos
        check_cards(game)
        assert game.undo_depth == len(before_moves)
        assert game.score >= 0
    # the log replays to the same game, and every logged action round-trips through its text
    assert Game.replay(game.deal, game.log) == game
    for action in game.log:
        assert parse_action(action.symbol()) == action
        assert parse_action(str(action).upper()) == action
    counts = Counter(type(action) for action in game.log)
    assert game.undos == counts[Undo]
    assert game.moves == counts[Move] - counts[Undo]
    assert len(game.log) == game.v


@given(deals, st.data())
def test_undo_all_returns_to_the_deal(deal: Deal, data: st.DataObject) -> None:
    game = Game(deal)
    play_random_moves(game, data, 40)
    played = game.moves
    while game.undo_depth:
        game.play(UNDO)
    assert game.layout() == deal.layout()
    assert (game.score, game.moves, game.undos, game.v) == (0, 0, played, 2 * played)
    assert fields(game) == fields(Game(deal))


@given(deals, st.data())
def test_tap_and_double_tap_make_legal_moves(deal: Deal, data: st.DataObject) -> None:
    game = Game(deal)
    for _ in range(30):
        moves = list(game.legal_moves)
        if not moves:
            break
        game.play(data.draw(st.sampled_from(moves), label="move"))
        sources: list[Pile] = [*map(Column, range(1, 9)), *map(Cell, range(1, game.cell_count + 1))]
        for source in sources:
            resolvers: list[Callable[[Pile], Move]] = [game.tap_move, game.double_tap_move]
            for resolve in resolvers:
                try:
                    move = resolve(source)
                except IllegalMoveError:
                    continue
                assert move.source == source
                assert move in game.legal_moves
                if resolve == game.tap_move:
                    assert isinstance(move.target, Foundation)


@given(deals, st.data())
def test_copy_is_equal_and_independent(deal: Deal, data: st.DataObject) -> None:
    game = Game(deal)
    play_random_moves(game, data, 20)
    twin = game.copy()
    assert twin == game and twin.state_key() == game.state_key()
    moves = list(twin.legal_moves)
    if moves:
        twin.play(moves[0])
        assert twin != game
        assert Game.replay(game.deal, game.log) == game
