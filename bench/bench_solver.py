"""Our solver beside Freecell Solver on the same deals: solve rate, median and p95 time per deal, and
every verdict that differs, per variant.

Freecell Solver (Debian's ``freecell-solver-bin``, installed with apt-get when ``fc-solve`` is
missing) runs as ``fc-solve -g eight_off --freecells-num C -l toons-for-twenty-somethings``, one
process per deal, the board on a file; its time is the wall time of that process (start-up included:
that is what a caller pays; ``fc-solve --version`` is timed too, as the start-up floor). Ours runs in
this process on the same deals, timed by ``Solution.seconds``.

Freecell Solver's Eight Off moves a group of at most (empty cells + 1) cards and never uses empty
columns for it; our rules allow (empty cells + 1) × 2^(empty columns). So every deal it wins, we must
win; a deal we win and it calls lost needs our larger groups (the bench checks the line we found
uses a group move beyond its limit). Ratios compare medians measured in the same run.

    .venv/bin/python -m bench.bench_solver [--deals 200] [--max-nodes 200000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from engine import FOUNDATION_ORDER, Card, Deal, Game, Layout, Move, Rank
from engine.piles import Column
from solver import Solution, Verdict, solve_deal

FC_SOLVE = "fc-solve"
_FC_ITERATIONS = 1_000_000


def ensure_fc_solve() -> str:
    """The path of fc-solve, installing Debian's freecell-solver-bin when it is missing."""
    found = shutil.which(FC_SOLVE)
    if found:
        return found
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    print("fc-solve missing: apt-get install freecell-solver-bin", file=sys.stderr)
    subprocess.run([*sudo, "apt-get", "update", "-q"], check=False, capture_output=True)
    subprocess.run([*sudo, "apt-get", "install", "-y", "-q", "freecell-solver-bin"], check=True)
    found = shutil.which(FC_SOLVE)
    if not found:
        raise SystemExit("fc-solve is still missing after installing freecell-solver-bin")
    return found


def fc_board(layout: Layout) -> str:
    """A position in Freecell Solver's board format (columns bottom card first)."""

    def text(card: Card | None) -> str:
        return "-" if card is None else str(card)

    heights = zip(FOUNDATION_ORDER, layout.foundations, strict=True)
    foundations = " ".join(f"{suit.value}-{Rank(height).symbol if height else 0}" for suit, height in heights)
    lines = [f"Foundations: {foundations}", "Freecells: " + " ".join(text(card) for card in layout.cells)]
    lines += [" ".join(map(str, column)) for column in layout.columns]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class FcResult:
    verdict: Verdict
    seconds: float


def run_fc_solve(path: str, layout: Layout) -> FcResult:
    """Freecell Solver's verdict on ``layout`` and the wall time of its process."""
    with tempfile.NamedTemporaryFile("w", suffix=".board") as board:
        board.write(fc_board(layout))
        board.flush()
        argv = [path, "-g", "eight_off", "--freecells-num", str(len(layout.cells))]
        argv += ["-l", "toons-for-twenty-somethings", "-mi", str(_FC_ITERATIONS), board.name]
        started = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - started
    out = done.stdout
    if "This game is solveable" in out:
        return FcResult(Verdict.WIN, seconds)
    if "I could not solve this game" in out:
        return FcResult(Verdict.LOST, seconds)
    return FcResult(Verdict.UNKNOWN, seconds)  # iterations exceeded


def needs_our_groups(deal: Deal, moves: tuple[Move, ...]) -> bool:
    """Whether our winning line moves a group larger than Freecell Solver's (empty cells + 1)."""
    game = Game(deal)
    for move in moves:
        if isinstance(move.target, Column) and move.count > game.empty_cells() + 1:
            return True
        game.play(move)
    return False


def startup_floor(path: str, runs: int = 20) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([path, "--version"], capture_output=True, check=False)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def bench_variant(path: str, cells: int, count: int, max_nodes: int) -> tuple[list[str], str]:
    """The table rows of both solvers on ``count`` deals of ``cells``' variant, and the comparison."""
    deals = [Deal(number * 0x9E3779B1 % (1 << 35), cells) for number in range(1, count + 1)]
    ours: list[Solution] = []
    theirs: list[FcResult] = []
    for deal in deals:
        ours.append(solve_deal(deal, max_nodes=max_nodes))
        theirs.append(run_fc_solve(path, deal.layout()))
    lines = []
    for name, verdicts, times in (
        ("ours", [s.verdict for s in ours], [s.seconds for s in ours]),
        ("fc-solve", [r.verdict for r in theirs], [r.seconds for r in theirs]),
    ):
        won = sum(v is Verdict.WIN for v in verdicts)
        lost = sum(v is Verdict.LOST for v in verdicts)
        lines.append(
            f"| C{cells} | {name} | {count} | {won} ({won / count:.1%}) | {lost} | {count - won - lost} | "
            f"{statistics.median(times) * 1000:.1f} | {quantile(times, 0.95) * 1000:.1f} |"
        )
    ratio = statistics.median(s.seconds for s in ours) / statistics.median(r.seconds for r in theirs)
    pairs = list(zip(deals, ours, theirs, strict=True))
    they_win_we_dont = [
        d.code() for d, s, r in pairs if r.verdict is Verdict.WIN and s.verdict is not Verdict.WIN
    ]
    we_win_they_lose = [
        (d, s) for d, s, r in pairs if s.verdict is Verdict.WIN and r.verdict is not Verdict.WIN
    ]
    bigger = sum(needs_our_groups(deal, solution.moves) for deal, solution in we_win_they_lose)
    summary = (
        f"C{cells}: median ours / fc-solve = {ratio:.2f}x; fc-solve wins, we do not: "
        f"{len(they_win_we_dont)} {they_win_we_dont[:5]}; we win, fc-solve does not: {len(we_win_they_lose)} "
        f"({bigger} of our lines move a group beyond fc-solve's limit) "
        f"{[deal.code() for deal, _ in we_win_they_lose[:5]]}"
    )
    return lines, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deals", type=int, default=200, help="deals per variant (200)")
    parser.add_argument("--max-nodes", type=int, default=200_000, help="our budget per deal (200,000)")
    args = parser.parse_args()
    path = ensure_fc_solve()
    print(f"fc-solve start-up floor (fc-solve --version): {startup_floor(path) * 1000:.1f} ms")
    print("| variant | solver | deals | won | lost | unknown | median ms | p95 ms |")
    print("|---|---|---|---|---|---|---|---|")
    summaries = []
    for cells in (8, 4, 2):
        lines, summary = bench_variant(path, cells, args.deals, args.max_nodes)
        print("\n".join(lines), flush=True)
        summaries.append(summary)
    print("\n".join(summaries))


if __name__ == "__main__":
    main()
