"""Engine benchmark: validated actions, undos and legal-move generation per second.

Run from the project root::

    .venv/bin/python -m bench.bench_engine        (or: .venv/bin/python bench/bench_engine.py)

It records random lines of play (random legal moves from random deals of all three variants, from a
seeded ``random.Random``), then times, on exactly those lines:

- apply: ``game.play(move)`` for every move (validated, as the server applies a client's move);
- undo: ``game.play(UNDO)`` back to the deal;
- generation: ``list(game.legal_moves)`` in every position met.

Each figure is printed beside a baseline measured in the same run, the raw work the engine cannot
avoid: slicing, deleting and extending plain Python lists of the same cards for apply and undo, and a
plain loop building as many tuples as there are legal moves for generation. The ratio engine/baseline
(a throughput ratio, below 1) is what to compare across machines and commits. Each timing is the best
of a few repeats, and the whole run takes a few seconds. This is not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import PILES, UNDO, Card, Deal, Game, Move, Pile

SEED = 20260601
GAMES = 300  # 100 per variant
LINE = 100  # moves per line at most: all of them stay undoable
REPEATS = 5

_PILE_INDEX: dict[Pile, int] = {pile: index for index, pile in enumerate(PILES)}


@dataclass
class Line:
    deal: Deal
    moves: list[Move]
    positions: list[Game]  # the position before each move
    legal_counts: list[int]  # how many legal moves each position has


def record(rng: random.Random) -> list[Line]:
    lines = []
    for number in range(GAMES):
        deal = Deal.random(rng, (8, 4, 2)[number % 3])
        game = Game(deal)
        line = Line(deal, [], [], [])
        for _ in range(LINE):
            moves = list(game.legal_moves)
            if not moves:
                break
            line.positions.append(game.copy())
            line.legal_counts.append(len(moves))
            move = rng.choice(moves)
            line.moves.append(move)
            game.play(move)
        lines.append(line)
    return lines


def best_of(run: Callable[[], None], setup: Callable[[], None] | None = None) -> float:
    """The fastest of ``REPEATS`` runs, in seconds; ``setup`` runs untimed before each."""
    times = []
    for _ in range(REPEATS):
        if setup is not None:
            setup()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def piles_of(deal: Deal) -> list[list[Card]]:
    """The deal as 20 plain lists: 8 columns, 8 cells, 4 foundations (the baseline's table)."""
    layout = deal.layout()
    piles: list[list[Card]] = [list(column) for column in layout.columns]
    piles += [[card] if card else [] for card in layout.cells] + [[] for _ in range(8 - len(layout.cells))]
    piles += [[] for _ in range(4)]
    return piles


def bench(lines: list[Line]) -> list[tuple[str, str, int, float, float]]:
    total_moves = sum(len(line.moves) for line in lines)
    total_positions = sum(len(line.positions) for line in lines)
    total_generated = sum(sum(line.legal_counts) for line in lines)
    steps = [[(_PILE_INDEX[m.source], _PILE_INDEX[m.target], m.count) for m in line.moves] for line in lines]

    games: list[Game] = []
    openings = [Game(line.deal) for line in lines]

    def fresh_games() -> None:
        games[:] = [game.copy() for game in openings]

    def engine_apply() -> None:
        for game, line in zip(games, lines, strict=True):
            play = game.play
            for move in line.moves:
                play(move)

    def played_games() -> None:
        fresh_games()
        engine_apply()

    def engine_undo() -> None:
        for game, line in zip(games, lines, strict=True):
            play = game.play
            for _ in line.moves:
                play(UNDO)

    tables: list[list[list[Card]]] = []
    opening_tables = [piles_of(line.deal) for line in lines]

    def fresh_tables() -> None:
        tables[:] = [[list(pile) for pile in opening] for opening in opening_tables]

    def baseline_apply() -> None:
        for table, line_steps in zip(tables, steps, strict=True):
            for source, target, count in line_steps:
                cards = table[source][-count:]
                del table[source][-count:]
                table[target].extend(cards)

    def played_tables() -> None:
        fresh_tables()
        baseline_apply()

    def baseline_undo() -> None:
        for table, line_steps in zip(tables, steps, strict=True):
            for source, target, count in reversed(line_steps):
                cards = table[target][-count:]
                del table[target][-count:]
                table[source].extend(cards)

    positions = [game for line in lines for game in line.positions]
    counts = [count for line in lines for count in line.legal_counts]

    def engine_generate() -> None:
        for game in positions:
            list(game.legal_moves)

    def baseline_generate() -> None:
        for count in counts:
            out = []
            for i in range(count):
                out.append((i, count, 1))

    results = [
        (
            "apply  game.play(move)",
            "action",
            total_moves,
            best_of(engine_apply, fresh_games),
            best_of(baseline_apply, fresh_tables),
        ),
        (
            "undo   game.play(UNDO)",
            "undo",
            total_moves,
            best_of(engine_undo, played_games),
            best_of(baseline_undo, played_tables),
        ),
        (
            "legal  list(legal_moves)",
            "generation",
            total_positions,
            best_of(engine_generate),
            best_of(baseline_generate),
        ),
    ]
    print(
        f"{total_generated:,} legal moves generated in {total_positions:,} positions "
        f"({total_generated / total_positions:.1f} per position)"
    )
    return results


def main() -> None:
    started = time.perf_counter()
    rng = random.Random(SEED)
    lines = record(rng)
    print(
        f"engine benchmark: {len(lines)} random lines of play (seed {SEED}), "
        f"{sum(len(line.moves) for line in lines):,} moves, Python {sys.version.split()[0]}"
    )
    results = bench(lines)
    print(f"{'':28}{'engine/s':>14}{'baseline/s':>14}{'ratio':>9}{'engine cost':>14}")
    for name, unit, total, engine_time, baseline_time in results:
        engine_rate, baseline_rate = total / engine_time, total / baseline_time
        print(
            f"{name:28}{engine_rate:>14,.0f}{baseline_rate:>14,.0f}{engine_rate / baseline_rate:>9.3f}"
            f"{engine_time / total * 1e6:>10.2f} µs/{unit}"
        )
    print(f"ratio = engine/baseline throughput; total run {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    # No options: --help says what it measures instead of running it, and a stray flag is refused.
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None).parse_args()
    main()
