"""protocol/vectors/moves.json: the file is what its generator writes, and every entry replays through
the engine: the position's legal moves are exactly the listed ones (every other move of every pile and
count is refused), each move makes its ops and points, each refusal gives its reason, and each tap and
double tap makes its move. The vectors also cover what the issue asked for: every entry of the seeds'
group-size table, empty columns, take-backs, the tap and double-tap order, and all three variants."""

from __future__ import annotations

import json
from typing import Any

import pytest

import protocol
from engine import (
    FOUNDATION_ORDER,
    PILES,
    UNDO,
    Card,
    Deal,
    Foundation,
    Game,
    IllegalMoveError,
    Layout,
    Move,
    max_group_size,
    parse_pile,
)
from tests.engine.make_move_vectors import PATH, build, render
from tests.engine.seed_tables import GROUP_KINDS, GROUP_TABLE

POSITIONS: list[dict[str, Any]] = json.loads(PATH.read_text(encoding="utf-8"))["positions"]
NAMES = [position["name"] for position in POSITIONS]


def test_move_vectors_file_is_what_the_generator_writes() -> None:
    assert PATH.read_text(encoding="utf-8") == render(build())


def game_of(position: dict[str, Any]) -> Game:
    """The game at a vector's position, read from its snapshot-shaped fields alone."""
    heights = [
        Card.parse(top).rank if (top := position["foundations"][suit.value]) else 0
        for suit in FOUNDATION_ORDER
    ]
    layout = Layout(
        columns=tuple(tuple(Card.parse(text) for text in column) for column in position["tableau"]),
        cells=tuple(Card.parse(text) if text else None for text in position["cells"]),
        foundations=(int(heights[0]), int(heights[1]), int(heights[2]), int(heights[3])),
    )
    assert len(layout.cells) == position["cell_count"]
    return Game.from_layout(layout, Deal(0, position["cell_count"]))


def move_of(wire: dict[str, Any]) -> Move:
    return Move(parse_pile(wire["from"]), parse_pile(wire["to"]), wire["n"])


@pytest.mark.parametrize("position", POSITIONS, ids=NAMES)
def test_move_vectors_list_every_legal_move_and_no_other(position: dict[str, Any]) -> None:
    game = game_of(position)
    listed = [move_of(entry) for entry in position["moves"]]
    assert len(set(listed)) == len(listed), "a move is listed twice"
    assert set(listed) == set(game.legal_moves)
    # Not only the generator: the validating path refuses every move the list leaves out.
    every = {Move(source, target, n) for source in PILES for target in PILES for n in range(1, 14)}
    assert {move for move in every if game.illegal_reason(move) is None} == set(listed)
    assert (game.empty_cells(), game.empty_columns()) == (position["empty_cells"], position["empty_columns"])
    largest = position["largest_group"]
    assert largest["onto_column"] == max_group_size(game.empty_cells(), game.empty_columns())
    if game.empty_columns():
        assert largest["into_empty_column"] == max_group_size(
            game.empty_cells(), game.empty_columns(), into_empty_column=True
        )
    else:
        assert largest["into_empty_column"] is None


@pytest.mark.parametrize("position", POSITIONS, ids=NAMES)
def test_move_vectors_replay_each_move_its_ops_and_points(position: dict[str, Any]) -> None:
    start = game_of(position)
    for entry in position["moves"]:
        game = start.copy()
        transfer = game.play(move_of(entry))
        assert protocol.Diff.of("g", game, transfer).to_wire()["ops"] == entry["ops"], entry
        assert transfer.points == entry["points"] == game.score - start.score
        game.play(UNDO)
        assert (game.layout(), game.score) == (start.layout(), start.score)
    for entry in position["illegal"]:
        with pytest.raises(IllegalMoveError) as refusal:
            start.copy().play(move_of(entry))
        assert refusal.value.reason.endswith(f"is illegal: {entry['reason']}")


@pytest.mark.parametrize("position", POSITIONS, ids=NAMES)
def test_move_vectors_replay_each_tap_and_double_tap(position: dict[str, Any]) -> None:
    game = game_of(position)
    for kind, make in (("taps", game.tap_move), ("double_taps", game.double_tap_move)):
        for entry in position[kind]:
            args = (parse_pile(entry["from"]), *([entry["n"]] if kind == "double_taps" else []))
            if entry["move"] is None:
                with pytest.raises(IllegalMoveError):
                    make(*args)
            else:
                move = make(*args)
                assert move == move_of(entry["move"])
                assert any(move_of(listed) == move for listed in position["moves"])
    sources = {pile.symbol() for pile in PILES if not isinstance(pile, Foundation) and game.cards_in(pile)}
    assert {entry["from"] for entry in position["taps"]} == sources
    assert {entry["from"] for entry in position["double_taps"]} == sources


# --------------------------------------------------------------------------- coverage


def _moves(**wanted: Any) -> list[dict[str, Any]]:
    return [m for p in POSITIONS for m in p["moves"] if all(m[k] == v for k, v in wanted.items())]


@pytest.mark.parametrize("cells", [8, 4, 2])
def test_move_vectors_cover_every_entry_of_the_seeds_table_in_each_variant(cells: int) -> None:
    """At the limit a group moves (or the longest run there is), and one card more is refused."""
    for empty_cells, sizes in GROUP_TABLE.items():
        if empty_cells > cells:
            continue
        for (into_empty, empty_columns), limit in zip(GROUP_KINDS, sizes, strict=True):
            kind = "into_empty_column" if into_empty else "onto_column"
            found = [
                p
                for p in POSITIONS
                if (p["cell_count"], p["empty_cells"], p["empty_columns"])
                == (cells, empty_cells, empty_columns)
                and p["largest_group"][kind] == limit
                and p["name"].startswith("group ")
                and ("King" in p["name"]) == into_empty
            ]
            assert len(found) == 1, (cells, empty_cells, into_empty, empty_columns)
            position = found[0]
            sizes_moved = group_sizes(position, into_empty)
            assert min(limit, 13 if into_empty else 12) in sizes_moved
            assert max(sizes_moved) <= limit
            if limit + 1 <= (13 if into_empty else 12):
                over = [m for m in position["illegal"] if m["n"] == limit + 1]
                assert over and over[0]["reason"].startswith(
                    f"group too large: {limit + 1} cards, at most {limit}"
                )


def group_sizes(position: dict[str, Any], into_empty: bool) -> set[int]:
    """The card counts of the legal moves from a column into an empty column, or onto one with cards."""
    tableau = position["tableau"]
    return {
        move["n"]
        for move in position["moves"]
        if move["from"][0] == move["to"][0] == "t" and (not tableau[int(move["to"][1:]) - 1]) == into_empty
    }


def test_move_vectors_cover_the_edges_the_issue_names() -> None:
    variants = {p["cell_count"] for p in POSITIONS if p["name"].startswith("opening ")}
    assert variants == {8, 4, 2}
    assert [len(column) for column in POSITIONS[2]["tableau"]] == [6, 6, 7, 7, 6, 6, 6, 6]  # C2
    # Empty columns take a King only.
    refusals = [m["reason"] for p in POSITIONS for m in p["illegal"]]
    assert any(reason.startswith("only a King goes into an empty column") for reason in refusals)
    # Take-backs: onto a column, into a cell, the ace (the foundation empty again), a King to an empty column.
    backs = [m for m in _moves() if m["from"].startswith("f")]
    assert {m["to"][0] for m in backs} == {"t", "c"} and all(m["points"] == 0 for m in backs)
    assert any(m["ops"][0]["top"] is None for m in backs)
    assert any(m["ops"][0]["cards"] == ["KD"] and m["to"].startswith("t") for m in backs)
    # Points: +10 onto a foundation, +5 from a cell onto a column, 0 otherwise.
    for move in _moves():
        expected = (
            10 if move["to"].startswith("f") else 5 if (move["from"][0], move["to"][0]) == ("c", "t") else 0
        )
        assert move["points"] == expected, move
    # Each step of the double-tap order is taken somewhere, and refusals are there too.
    made = [(d["from"][0], d["move"]) for p in POSITIONS for d in p["double_taps"]]
    steps = {move["to"][0] for _, move in made if move}
    assert steps == {"f", "t", "c"}
    assert any(move is None for _, move in made)
    assert not any(source == "c" and move and move["to"][0] == "c" for source, move in made)
    assert any(t["move"] is None for p in POSITIONS for t in p["taps"])
    assert any(t["move"] and t["from"][0] == "c" for p in POSITIONS for t in p["taps"])


def test_move_vectors_show_the_king_at_the_bottom_exception() -> None:
    """A double tap never moves a King that is its column's bottom card into an empty column."""
    position = next(p for p in POSITIONS if "bottom of its column" in p["name"])
    taps = {(d["from"], d["n"]): d["move"] for d in position["double_taps"]}
    assert taps[("t1", 1)] == {"from": "t1", "to": "c2", "n": 1}  # KS alone: a cell, not t8
    assert taps[("t2", 2)] is None  # KH under QH: nowhere
    assert taps[("t3", 1)] == {"from": "t3", "to": "t8", "n": 1}  # KC on JD: into t8
    assert taps[("c1", 1)] == {"from": "c1", "to": "t8", "n": 1}
    legal = {(m["from"], m["to"], m["n"]) for m in position["moves"]}
    assert {("t1", "t8", 1), ("t2", "t8", 2)} <= legal  # as plain moves they are legal
