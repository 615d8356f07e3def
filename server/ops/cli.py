"""The ``eightoff`` command line: serve, db, deal, solve, verify, export, replay."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from engine import Deal, InvalidCodeError
from protocol import layout_fields
from server import __version__
from server.config import SettingError, Unavailable, add_arguments, needs, settings_from_args
from server.ops.runtime import configure_logging, fast_event_loop

__all__ = ["main"]


def _parse_code(args: argparse.Namespace) -> Deal | None:
    """The deal of ``args.code``, or None after saying on stderr why it is not a game code."""
    try:
        return Deal.from_code(args.code)
    except InvalidCodeError as exc:
        print(f"eightoff {args.command}: {exc}", file=sys.stderr)
        return None


def _deal(args: argparse.Namespace) -> int:
    deal = _parse_code(args)
    if deal is None:
        return 2
    layout = deal.layout()
    if args.json:
        fields = layout_fields(layout)
        document = {"code": deal.code(), "tableau": fields["tableau"], "cells": fields["cells"]}
        print(json.dumps(document))
    else:
        print(deal.code())
        print(layout.text())
    return 0


def _solve(args: argparse.Namespace) -> int:
    from protocol import move_action
    from solver import solve_deal

    deal = _parse_code(args)
    if deal is None:
        return 2
    solution = solve_deal(deal, max_nodes=args.max_nodes, max_seconds=args.max_seconds)
    if args.json:
        document = {
            "code": deal.code(),
            "verdict": solution.verdict.value,
            "actions": [move_action(move) for move in solution.moves],
            "nodes": solution.nodes,
            "seconds": round(solution.seconds, 6),
        }
        print(json.dumps(document))
    else:
        for move in solution.moves:
            print(json.dumps(move_action(move)))
        print(
            f"{deal.code()}: {solution.verdict.value} ({len(solution.moves)} actions), "
            f"{solution.nodes:,} positions searched in {solution.seconds:.3f} s"
        )
    return 0


def _winnable(args: argparse.Namespace) -> int:
    from server.services.winnable import TABLE_MAX_NODES, TABLE_SEED, search_winnable
    from solver import Verdict

    started = time.monotonic()
    tally = dict.fromkeys(Verdict, 0)
    won: list[str] = []
    for deal, solution in search_winnable(args.cells, workers=args.workers):
        tally[solution.verdict] += 1
        if solution.verdict is Verdict.WIN:
            won.append(deal.code())
            if len(won) == args.count:
                break
    seconds = time.monotonic() - started
    print(
        f"# {len(won)} deals proven winnable in C{args.cells}: the won candidates of seed {TABLE_SEED} "
        f"at {TABLE_MAX_NODES:,} positions each, made by `eightoff winnable --cells {args.cells} "
        f"--count {args.count}`"
    )
    print(
        f"# tried {sum(tally.values()):,}: "
        + ", ".join(f"{verdict.value} {count:,}" for verdict, count in tally.items())
        + f"; {seconds:,.0f} s with {args.workers} process(es)"
    )
    print("\n".join(won))
    return 0


def _serve(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    if settings.workers > 1:
        from server.ops.workers import Supervisor  # after the settings, as below

        configure_logging("supervisor")
        with asyncio.Runner(loop_factory=fast_event_loop()) as runner:
            return runner.run(Supervisor(settings).run())
    from server.app import run  # after the settings: a bad one is refused without loading the server
    from server.ops.workers import check_address_free

    with needs("host", "port", what=f"cannot listen on {settings.host} port {settings.port}"):
        check_address_free(settings.host, settings.port)
    configure_logging(None)
    with asyncio.Runner(loop_factory=fast_event_loop()) as runner:
        runner.run(run(settings))
    return 0


def _db(args: argparse.Namespace) -> int:
    from server.storage import current_revision, head_revision, upgrade_to_head
    from server.storage.db import check_sqlite_files

    settings = settings_from_args(args)
    with needs(
        "database_url", what=f"cannot {'migrate' if args.action == 'upgrade' else 'read'} the database"
    ):
        if args.action == "upgrade":
            check_sqlite_files(settings.database_url)  # as serve: a missing directory is not created
            upgrade_to_head(settings.database_url)
        current = current_revision(settings.database_url)
    print(f"database at {current or 'base (empty)'}; head is {head_revision()}")
    return 0


class _ProgressBar:
    """A one-line progress bar on a text stream (redrawn in place on a terminal, else a line per 10%)."""

    def __init__(self, stream: TextIO, label: str, *, width: int = 30, interval: float = 0.1) -> None:
        self._stream = stream
        self._label = label
        self._width = width
        self._interval = interval
        self._is_tty = stream.isatty()
        self._started = time.monotonic()
        self._drawn_at = 0.0
        self._tenth = -1
        self._line = ""

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        fraction = min(1.0, done / total) if total else 1.0
        elapsed = max(now - self._started, 1e-9)
        rate = done / elapsed
        eta = (total - done) / rate if rate and total > done else 0.0
        filled = int(fraction * self._width)
        self._line = (
            f"{self._label} [{'#' * filled}{'.' * (self._width - filled)}] {fraction:4.0%} "
            f"{done:,}/{total:,} games, {rate:,.0f}/s, {eta:,.0f} s left"
        )
        if self._is_tty:
            if now - self._drawn_at >= self._interval or done >= total:
                self._stream.write("\r" + self._line)
                self._stream.flush()
                self._drawn_at = now
        elif int(fraction * 10) > self._tenth:
            self._tenth = int(fraction * 10)
            self._stream.write(self._line + "\n")
            self._stream.flush()

    def finish(self) -> None:
        if self._is_tty and self._line:
            self._stream.write("\n")
            self._stream.flush()


def _verify(args: argparse.Namespace) -> int:
    from server.ops.verify import verify_games, verify_races, verify_ratings
    from server.storage import Database, current_revision

    settings = settings_from_args(args)
    bar = _ProgressBar(sys.stderr, "verify")

    async def run() -> tuple[int, list[Any], int, list[Any], int, list[Any]]:
        database = Database.create(settings.database_url)
        try:
            checked, mismatches = await verify_games(database, batch=args.batch, progress=bar)
            races, rating_mismatches = await verify_ratings(database, batch=args.batch)
            finished, race_mismatches = await verify_races(database, batch=args.batch)
            return checked, mismatches, races, rating_mismatches, finished, race_mismatches
        finally:
            await database.dispose()

    with needs("database_url", what="cannot read the database"):
        if current_revision(settings.database_url) is None:
            print("eightoff verify: the database has no schema (run `eightoff db upgrade`)", file=sys.stderr)
            return 2
        checked, mismatches, races, rating_mismatches, finished, race_mismatches = asyncio.run(run())
    bar.finish()
    for mismatch in mismatches:
        print(f"MISMATCH {mismatch.game_id}: {mismatch.problem}")
    print(f"verified {checked:,} stored games: {len(mismatches):,} mismatch(es)")
    for mismatch in rating_mismatches:
        print(f"RATING MISMATCH {mismatch.game_id}: {mismatch.problem}")
    print(f"verified the ratings of {races:,} rated races: {len(rating_mismatches):,} mismatch(es)")
    for mismatch in race_mismatches:
        print(f"RACE MISMATCH {mismatch.game_id}: {mismatch.problem}")
    print(f"verified {finished:,} finished races: {len(race_mismatches):,} mismatch(es)")
    return 1 if mismatches or rating_mismatches or race_mismatches else 0


def _export(args: argparse.Namespace) -> int:
    from server.ops.records import ExportError, load_record
    from server.storage import Database, current_revision

    settings = settings_from_args(args)

    async def run() -> str:
        database = Database.create(settings.database_url)
        try:
            return (await load_record(database, args.game_id)).text()
        finally:
            await database.dispose()

    with needs("database_url", what="cannot read the database"):
        if current_revision(settings.database_url) is None:
            print("eightoff export: the database has no schema (run `eightoff db upgrade`)", file=sys.stderr)
            return 2
        try:
            text = asyncio.run(run())
        except ExportError as exc:
            print(f"eightoff export: {exc}", file=sys.stderr)
            return 1
    sys.stdout.write(text)
    return 0


def _replay(args: argparse.Namespace) -> int:
    from protocol import GameRecord, InvalidRecordError, RecordMismatchError, replay_record
    from protocol.records import MAX_RECORD_CHARS

    try:
        if args.file == "-":
            text = sys.stdin.read(MAX_RECORD_CHARS + 1)
        else:
            with open(args.file, encoding="utf-8") as source:
                text = source.read(MAX_RECORD_CHARS + 1)  # a longer one is refused unread
        record = GameRecord.parse(text)
    except (OSError, UnicodeDecodeError, InvalidRecordError) as exc:
        print(f"eightoff replay: {args.file}: not a game record: {exc}", file=sys.stderr)
        return 2
    try:
        game = replay_record(record)
    except RecordMismatchError as exc:
        print(f"eightoff replay: {args.file}: does not replay as recorded: {exc}", file=sys.stderr)
        return 1
    print(
        f"{record.deal.code()} {game.status.value}: score {game.score}, {game.moves} moves, "
        f"{game.undos} undos, {game.v} actions; the record replays as it says"
    )
    return 0


def _positive_int(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return int(text)


#: The settings of the commands that only read or migrate the database (db, verify, export): the same
#: flag, variable and default as serve's.
_DATABASE_SETTINGS = ("database_url",)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="eightoff", description="Eight Off solitaire game server")
    parser.add_argument("--version", action="version", version=f"eightoff {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="run the server (migrates the database to head first)",
        description="Run the game server. Every flag can also be set by its EIGHTOFF_* variable.",
    )
    add_arguments(serve)
    serve.set_defaults(handler=_serve)
    db = commands.add_parser("db", help="database migrations for operators")
    db.add_argument("action", choices=["upgrade", "current"], help="upgrade to head, or show the revision")
    add_arguments(db, only=_DATABASE_SETTINGS)
    db.set_defaults(handler=_db)
    deal = commands.add_parser("deal", help="print the opening layout of a game code")
    deal.add_argument("code", help="a game code such as EO1-C8-AAAAAFA")
    deal.add_argument(
        "--json", action="store_true", help="print the layout as JSON (protocol snapshot shapes)"
    )
    deal.set_defaults(handler=_deal)
    solve = commands.add_parser(
        "solve",
        help="solve a deal: a winning line as protocol actions, or lost, or unknown",
        description="Search a deal under our rules. Prints each action of a winning line (the move "
        "request without id and game), then the verdict (win, lost: no win exists, unknown: the budget "
        "ran out), the positions searched and the time.",
    )
    solve.add_argument("code", help="a game code such as EO1-C8-AAAAAFA")
    solve.add_argument("--json", action="store_true", help="print one JSON document")
    solve.add_argument(
        "--max-nodes", type=int, default=2_000_000, metavar="N", help="positions before unknown (2,000,000)"
    )
    solve.add_argument(
        "--max-seconds", type=float, default=None, metavar="S", help="seconds before unknown (no limit)"
    )
    solve.set_defaults(handler=_solve)
    winnable = commands.add_parser(
        "winnable",
        help="print a table of proven-winnable deals (server/services/winnable/C<cells>.txt)",
        description="Solve the table's candidate deals in order and print the first COUNT proven "
        "winnable, with a header saying how many were tried and how long it took.",
    )
    winnable.add_argument("--cells", type=int, choices=(8, 4, 2), required=True)
    winnable.add_argument("--count", type=int, default=1000, metavar="N", help="deals to find (1000)")
    winnable.add_argument("--workers", type=int, default=2, metavar="N", help="processes (2)")
    winnable.set_defaults(handler=_winnable)
    verify = commands.add_parser(
        "verify",
        help="replay every stored game through the engine and report any that does not end as stored",
        description="Replay every stored game's actions through the rules engine and compare the result "
        "with the stored status, score, moves, undos and won flag. Exits 1 when any game differs.",
    )
    add_arguments(verify, only=_DATABASE_SETTINGS)
    verify.add_argument(
        "--batch",
        type=_positive_int,
        default=500,
        metavar="N",
        help="games per read (default 500)",
    )
    verify.set_defaults(handler=_verify)
    export = commands.add_parser(
        "export",
        help="print a stored game as a game record (protocol/README.md section 14)",
        description="Print the game record of a stored game: its deal, player, times, every action and "
        "result. Exits 1 when no game has the id or the game does not replay as stored.",
    )
    export.add_argument("game_id", metavar="GAME_ID", help="the game's id")
    add_arguments(export, only=_DATABASE_SETTINGS)
    export.set_defaults(handler=_export)
    replay = commands.add_parser(
        "replay",
        help="check a game record by replaying it through the rules engine; print the result",
        description="Read a game record (protocol/README.md section 14), replay every action through "
        "the rules engine and print how the game ends. Exits 1 when an action is illegal or the game "
        "does not end as the record says, 2 when the file is not a record.",
    )
    replay.add_argument("file", metavar="FILE", help="the record's file, or - for standard input")
    replay.set_defaults(handler=_replay)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command; its failures end as one line on stderr and an exit status, never a traceback:
    2 for a bad setting, 1 for an environment that refuses (`Unavailable`)."""
    args = build_parser().parse_args(argv)
    try:
        status = int(args.handler(args))
        sys.stdout.flush()  # a reader that left shows here, not as a traceback at exit
    except SettingError as exc:
        print(f"eightoff {args.command}: bad setting {exc}", file=sys.stderr)
        return 2
    except Unavailable as exc:
        print(f"eightoff {args.command}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # `eightoff deal CODE | head -1`: the reader has what it wanted. End quietly, with the status
        # of a program that SIGPIPE ended; stdout goes to devnull so the exit's flush cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    return status


if __name__ == "__main__":
    sys.exit(main())
