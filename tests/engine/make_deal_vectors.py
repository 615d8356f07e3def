"""Write ``protocol/vectors/deals.json``: known-answer deals for clients in any language.

Run ``python -m tests.engine.make_deal_vectors`` from the project root to rewrite the file; the test
``test_deal.py::test_deal_vectors_*`` checks that the engine still reproduces every entry, so the file
changes only when the shuffle or the layouts change on purpose (which breaks every stored game).

Each entry: ``code``; ``number`` (the 35-bit deal number); ``cell_count`` (8, 4 or 2); ``deck`` (the 52
cards after the shuffle, in dealing order); ``tableau`` (8 columns, bottom card first); ``cells`` (one
card or null per usable cell). ``tableau`` and ``cells`` have the shape of the wire snapshot.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from engine import Deal
from engine.deal import DEAL_NUMBER_BITS, shuffled_deck

__all__ = ["PATH", "build", "render", "vector"]

PATH = Path(__file__).parents[2] / "protocol" / "vectors" / "deals.json"

SPEC = (
    "Eight Off deal vectors (protocol/README.md section 11). Deck AC..KC, AD..KD, AH..KH, AS..KS; "
    "SplitMix64 seeded with the deal number; for i = 51 down to 1: j = next output mod (i + 1), swap "
    "cards i and j. "
    "Card k < 48 goes to column (k mod 8) + 1, bottom first. C8: cards 48-51 in cells 1-4, cells 5-8 "
    "empty. C4: cards 48-51 in cells 1-4. C2: cards 48-49 in cells 1-2, cards 50 and 51 at the bottom "
    "of columns 3 and 4 (each under the six dealt cards, its column's first card)."
)

#: The deal numbers written, each in all three variants: the smallest and the largest, the design's
#: example (AAAAAFA = 160), a few edges, and seeded random ones.
NUMBERS: tuple[int, ...] = (
    0,
    (1 << DEAL_NUMBER_BITS) - 1,
    160,
    1,
    1 << (DEAL_NUMBER_BITS - 1),
    *random.Random(20260601).sample(range(1 << DEAL_NUMBER_BITS), 5),
)


def vector(deal: Deal) -> dict[str, Any]:
    """The entry of one deal."""
    layout = deal.layout()
    return {
        "code": deal.code(),
        "number": deal.number,
        "cell_count": deal.cells,
        "deck": [str(card) for card in shuffled_deck(deal.number)],
        "tableau": [[str(card) for card in column] for column in layout.columns],
        "cells": [str(card) if card else None for card in layout.cells],
    }


def build() -> list[dict[str, Any]]:
    return [vector(Deal(number, cells)) for cells in (8, 4, 2) for number in NUMBERS]


def render(vectors: list[dict[str, Any]]) -> str:
    """JSON with one line per field of an entry, so that a diff shows which deal changed."""
    entries = []
    for entry in vectors:
        fields = ",\n".join(f"      {json.dumps(key)}: {json.dumps(value)}" for key, value in entry.items())
        entries.append("    {\n" + fields + "\n    }")
    return '{\n  "spec": ' + json.dumps(SPEC) + ',\n  "vectors": [\n' + ",\n".join(entries) + "\n  ]\n}\n"


def main() -> None:
    vectors = build()
    PATH.write_text(render(vectors), encoding="utf-8")
    print(f"wrote {len(vectors)} deal vectors to {PATH}")


if __name__ == "__main__":
    main()
