"""The solver: wins replay through the engine, verdicts agree with a brute-force search, known positions."""

from __future__ import annotations

import random
import shutil

import pytest

from bench.bench_solver import run_fc_solve
from engine import CELL_VARIANTS, FOUNDATION_ORDER, PILES, Card, Deal, Foundation, Game, Layout, Rank
from server.services.winnable import winnable_deals
from solver import Verdict, solve, solve_deal
from tests.support.positions import layout_at, run_of

#: Sample deals per variant: deal numbers from a fixed stride so that they spread over the range.
DEALS_PER_VARIANT = 100


def deal_numbers(count: int) -> list[int]:
    return [number * 0x2545F491 % (1 << 35) for number in range(1, count + 1)]


def replays_as_win(layout: Layout, moves: tuple[object, ...]) -> bool:
    game = Game.from_layout(layout)
    for move in moves:
        game.play(move)  # type: ignore[arg-type]
    return game.is_won()


@pytest.mark.parametrize("cells", CELL_VARIANTS)
def test_solve_wins_100_winnable_deals_of_each_variant_and_the_wins_replay(cells: int) -> None:
    """The first 100 deals of each shipped table of winnable deals (server/winnable)."""
    deals = winnable_deals(cells)[:100]
    assert len(deals) == 100
    for deal in deals:
        solution = solve_deal(deal)
        assert solution.verdict is Verdict.WIN, deal
        game = Game(deal)
        for move in solution.moves:
            game.play(move)
        assert game.is_won(), deal


@pytest.mark.parametrize("cells", CELL_VARIANTS)
def test_solve_sample_deals_without_unknowns(cells: int) -> None:
    """Deals spread over the range: every verdict is reached within budget, wins replay."""
    verdicts: dict[Verdict, int] = dict.fromkeys(Verdict, 0)
    for number in deal_numbers(DEALS_PER_VARIANT):
        deal = Deal(number, cells)
        solution = solve_deal(deal, max_nodes=200_000)
        verdicts[solution.verdict] += 1
        if solution.verdict is Verdict.WIN:
            assert replays_as_win(deal.layout(), solution.moves), deal
        else:
            assert solution.moves == ()
    assert verdicts[Verdict.UNKNOWN] == 0, verdicts
    if cells == 8:
        assert verdicts[Verdict.WIN] == DEALS_PER_VARIANT  # every C8 deal of the sample is won
    else:
        assert verdicts[Verdict.LOST] > verdicts[Verdict.WIN], verdicts


def test_solve_a_won_position_is_a_win_with_no_moves() -> None:
    won = Layout(columns=((),) * 8, cells=(None,) * 8, foundations=(13, 13, 13, 13))
    solution = solve(won)
    assert (solution.verdict, solution.moves) == (Verdict.WIN, ())


def test_solve_plays_foundation_moves_first_as_real_moves() -> None:
    # all spades in one column, the Ace on top: thirteen foundation moves and nothing else
    layout = layout_at(
        [" ".join(reversed(run_of("S", "K", 13)[::-1])), "", "", "", "", "", "", ""], [None] * 8
    )
    solution = solve(layout)
    assert solution.verdict is Verdict.WIN and len(solution.moves) == 13
    assert replays_as_win(layout, solution.moves)


# ---------------------------------------------------------------- hand-built positions

#: Two cells, both full (2H 3H wait for AH); AH lies under KS QS; 4H lies under the run KH..5H; no
#: other card can move. The only way on is the group KS QS into an empty column with no free cell: the
#: seeds allow (0 + 1) × 2^(2 - 1) = 2 cards with two empty columns (the destination not counted), so
#: it is won. Freecell Solver's Eight Off allows (0 + 1) = 1 card, and the cells can never empty
#: before AH is out: it calls the position lost.
HEARTS = "9D 4H " + " ".join(run_of("H", "K", 9))
TWO_EMPTY_COLUMNS = ["JS AH KS QS", HEARTS, "KD QC", "KC QD", "9C JC TD", "JD TC", "", ""]


def test_solve_wins_where_two_empty_columns_carry_a_king_and_its_queen() -> None:
    layout = layout_at(TWO_EMPTY_COLUMNS, ["2H", "3H"], {"S": 10, "D": 8, "C": 8})
    solution = solve(layout)
    assert solution.verdict is Verdict.WIN
    assert replays_as_win(layout, solution.moves)
    first = solution.moves[0]
    assert (str(first.source), first.count) == ("t1", 2)
    assert not layout.columns[PILES.index(first.target)]


@pytest.mark.skipif(
    shutil.which("fc-solve") is None, reason="fc-solve (freecell-solver-bin) is not installed"
)
def test_freecell_solver_calls_the_two_empty_columns_position_lost() -> None:
    layout = layout_at(TWO_EMPTY_COLUMNS, ["2H", "3H"], {"S": 10, "D": 8, "C": 8})
    result = run_fc_solve(shutil.which("fc-solve") or "", layout)
    assert result.verdict is Verdict.LOST  # while ours wins it (the test above)


def test_solve_proves_lost_where_one_empty_column_carries_a_king_alone() -> None:
    # 8D (its 7D and 9D buried under the hearts) fills column 7: one empty column, groups of one.
    columns = [*TWO_EMPTY_COLUMNS[:6], "8D", ""]
    columns[1] = "7D " + HEARTS
    layout = layout_at(columns, ["2H", "3H"], {"S": 10, "D": 6, "C": 8})
    assert not Game.from_layout(layout).legal_moves
    assert solve(layout).verdict is Verdict.LOST


def test_solve_a_dead_opening_is_lost() -> None:
    # An opening with no legal move at all (C2): found by search, its verdict must be LOST.
    for number in deal_numbers(2000):
        deal = Deal(number, 2)
        if not Game(deal).legal_moves:
            solution = solve_deal(deal)
            assert solution.verdict is Verdict.LOST and solution.nodes == 0
            return
    pytest.fail("no dead C2 opening among the first 2000 sample deals")


def test_solve_budget_gives_unknown() -> None:
    deal = Deal.from_code("EO1-C4-DP2HO3G")  # won after some 30,000 positions
    solution = solve_deal(deal, max_nodes=10)
    assert solution.verdict is Verdict.UNKNOWN and solution.moves == ()
    ticks = iter(range(1_000_000))
    timed = solve_deal(deal, max_seconds=5, clock=lambda: float(next(ticks)))
    assert timed.verdict is Verdict.UNKNOWN


# ---------------------------------------------------------------- against a brute-force search


def brute_force_is_winnable(layout: Layout, limit: int, *, take_backs: bool) -> bool | None:
    """Depth-first over every legal move of the engine (with or without take-backs), no other
    reduction; None when more than ``limit`` positions are reachable."""
    start = Game.from_layout(layout)
    seen = {start.layout()}
    stack = [start]
    while stack:
        game = stack.pop()
        if game.is_won():
            return True
        for move in list(game.legal_moves):
            if not take_backs and isinstance(move.source, Foundation):
                continue
            child = game.copy()
            child.push(move)
            picture = child.layout()
            if picture not in seen:
                if len(seen) >= limit:
                    return None
                seen.add(picture)
                stack.append(child)
    return False


def endgame(rng: random.Random, cells: int, on_table: int) -> Layout:
    """A tight random endgame: ``on_table`` cards (the highest of two suits) shuffled onto the
    columns (none empty), all cells full, the rest home."""
    heights = [13, 13, 13, 13]
    table: list[Card] = []
    while len(table) < on_table:
        suit_index = rng.randrange(2)
        if heights[suit_index]:
            table.append(Card(Rank(heights[suit_index]), FOUNDATION_ORDER[suit_index]))
            heights[suit_index] -= 1
    rng.shuffle(table)
    columns: list[list[Card]] = [[card] for card in table[cells : cells + 8]]
    for card in table[cells + 8 :]:
        columns[rng.randrange(8)].append(card)
    return Layout(
        columns=tuple(tuple(column) for column in columns),
        cells=tuple(table[:cells]),
        foundations=tuple(heights),  # type: ignore[arg-type]
    )


def test_solve_agrees_with_brute_force_on_random_c2_endgames() -> None:
    """The brute force without take-backs checks the move generator and reductions 1, 3 and 4."""
    cells = 2
    rng = random.Random(cells)
    agreed = 0
    for _ in range(20):
        layout = endgame(rng, cells, cells + 8 + rng.randint(0, 4))
        truth = brute_force_is_winnable(layout, limit=3000, take_backs=False)
        if truth is None:
            continue
        solution = solve(layout)
        assert solution.verdict is (Verdict.WIN if truth else Verdict.LOST), layout.text()
        if truth:
            assert replays_as_win(layout, solution.moves)
        agreed += 1
    assert agreed >= 5


def test_solve_agrees_with_brute_force_on_small_c2_openings() -> None:
    """Most C2 openings reach few positions: the brute force (take-backs included) sees them all."""
    verdicts: dict[bool, int] = {True: 0, False: 0}
    for number in deal_numbers(60):
        layout = Deal(number, 2).layout()
        truth = brute_force_is_winnable(layout, limit=3000, take_backs=True)
        if truth is None:
            continue
        assert solve(layout).verdict is (Verdict.WIN if truth else Verdict.LOST), Deal(number, 2)
        verdicts[truth] += 1
    assert verdicts[False] >= 30, verdicts
