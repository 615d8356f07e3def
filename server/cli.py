"""The ``eightoff`` command line: deal, serve, db."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from engine import Deal, InvalidCodeError

__all__ = ["main"]


def _deal(args: argparse.Namespace) -> int:
    try:
        deal = Deal.from_code(args.code)
    except InvalidCodeError as exc:
        print(f"eightoff deal: {exc}", file=sys.stderr)
        return 2
    layout = deal.layout()
    if args.json:
        document = {
            "code": deal.code(),
            "tableau": [[card.symbol() for card in column] for column in layout.columns],
            "cells": [card.symbol() if card else None for card in layout.cells],
        }
        print(json.dumps(document))
    else:
        print(deal.code())
        print(layout.text())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="eightoff", description="Eight Off solitaire game server")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    deal = commands.add_parser("deal", help="print the opening layout of a game code")
    deal.add_argument("code", help="a game code such as EO1-C8-AAAAAFA")
    deal.add_argument("--json", action="store_true", help="print the layout as JSON (protocol snapshot shapes)")
    deal.set_defaults(handler=_deal)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
