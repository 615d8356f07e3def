"""The ``eightoff`` command line: serve, db, deal."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Sequence

from engine import Deal, InvalidCodeError
from protocol import layout_fields
from server.config import Settings, add_arguments, settings_from_args

__all__ = ["main"]


def _deal(args: argparse.Namespace) -> int:
    try:
        deal = Deal.from_code(args.code)
    except InvalidCodeError as exc:
        print(f"eightoff deal: {exc}", file=sys.stderr)
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


def _settings(args: argparse.Namespace) -> Settings | None:
    try:
        return settings_from_args(args)
    except ValueError as exc:
        print(f"eightoff: bad setting: {exc}", file=sys.stderr)
        return None


def _serve(args: argparse.Namespace) -> int:
    from server.app import run

    settings = _settings(args)
    if settings is None:
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(run(settings))
    return 0


def _db(args: argparse.Namespace) -> int:
    from server.storage import current_revision, head_revision, upgrade_to_head

    settings = _settings(args)
    if settings is None:
        return 2
    if args.action == "upgrade":
        upgrade_to_head(settings.database_url)
    current = current_revision(settings.database_url)
    print(f"database at {current or 'base (empty)'}; head is {head_revision()}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="eightoff", description="Eight Off solitaire game server")
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
    db.add_argument(
        "--database-url", dest="database_url", default=None, help="as for serve (env EIGHTOFF_DATABASE_URL)"
    )
    db.set_defaults(handler=_db)
    deal = commands.add_parser("deal", help="print the opening layout of a game code")
    deal.add_argument("code", help="a game code such as EO1-C8-AAAAAFA")
    deal.add_argument(
        "--json", action="store_true", help="print the layout as JSON (protocol snapshot shapes)"
    )
    deal.set_defaults(handler=_deal)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
