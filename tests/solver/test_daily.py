"""The winnable daily deal: pinned codes (every node and client must find the same), and its rule."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from engine import Deal, daily_deal
from solver import DAILY_MAX_NODES, Verdict, candidate_numbers, solve_deal, winnable_daily_deal

DAY = dt.date(2026, 11, 30)
README = Path(__file__).parents[2] / "protocol" / "README.md"


@pytest.mark.parametrize(
    ("cells", "code", "index"),
    [(8, "EO1-C8-M5DS76B", 0), (4, "EO1-C4-4WO7I2T", 4), (2, "EO1-C2-B2DN2MD", 221)],
)
def test_winnable_daily_deal_of_a_day_is_pinned(cells: int, code: str, index: int) -> None:
    deal = winnable_daily_deal(DAY, cells)
    assert deal.code() == code and code in README.read_text()
    numbers = list(zip(candidate_numbers((DAY - dt.date(1970, 1, 1)).days), range(index + 1), strict=False))
    assert numbers[index][0] == deal.number
    for number, _ in numbers[:index]:  # every earlier candidate is not proven winnable
        assert solve_deal(Deal(number, cells), max_nodes=DAILY_MAX_NODES).verdict is not Verdict.WIN


def test_first_candidate_is_the_old_daily_deal() -> None:
    for offset in range(30):
        day = DAY + dt.timedelta(days=offset)
        first = next(candidate_numbers((day - dt.date(1970, 1, 1)).days))
        assert first == daily_deal(day).number
        assert winnable_daily_deal(day, 8).number == first  # C8 deals are (nearly) all winnable
