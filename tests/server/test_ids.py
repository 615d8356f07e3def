"""Ids (`server.ids`): what a command line is handed must never read as an option."""

from __future__ import annotations

import secrets
from unittest import mock

from protocol.limits import ID_PATTERN
from server import ids


def test_an_id_never_starts_with_a_dash() -> None:
    """secrets gives a leading ``-`` one time in 64; forced here on the first draw, the id is drawn again."""
    draws = iter(["-hbarnBJpd-yBDT4", "xbarnBJpd-yBDT4A"])
    with mock.patch.object(secrets, "token_urlsafe", lambda _: next(draws)):
        assert ids.new_id() == "xbarnBJpd-yBDT4A"
    made = [ids.new_id() for _ in range(2000)]
    assert not any(made_id.startswith("-") for made_id in made)
    assert all(ID_PATTERN.fullmatch(made_id) and len(made_id) == 16 for made_id in made)
