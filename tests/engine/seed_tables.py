"""The seeds' group-size table, shared by the engine tests that check it (formula and play).

Rows: empty cells. Columns: the largest group that may move onto an occupied column with 0 / 1 / 2 empty
columns, then a King run into an empty column with 1 / 2 empty columns in total (``GROUP_KINDS``).
"""

from __future__ import annotations

GROUP_TABLE = {
    0: (1, 2, 4, 1, 2),
    2: (3, 6, 12, 3, 6),
    4: (5, 10, 20, 5, 10),
    6: (7, 14, 28, 7, 14),
    8: (9, 18, 36, 9, 18),
}

GROUP_KINDS = [  # (into an empty column?, empty columns)
    (False, 0),
    (False, 1),
    (False, 2),
    (True, 1),
    (True, 2),
]
