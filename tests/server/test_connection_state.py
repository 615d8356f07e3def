"""The connection lifecycle's table (server/edge/connection_state.py), driven bare: no socket, no
transport, phases only."""

from __future__ import annotations

import itertools

import pytest

from server.edge import connection_state
from server.edge.connection_state import TRANSITIONS, IllegalTransition, Phase, advance

ALLOWED = sorted(
    ((phase, to) for phase, targets in TRANSITIONS.items() for to in targets),
    key=lambda pair: (pair[0].name, pair[1].name),
)
FORBIDDEN = [pair for pair in itertools.product(Phase, Phase) if pair[1] not in TRANSITIONS[pair[0]]]


@pytest.mark.parametrize(("phase", "to"), ALLOWED, ids=lambda phase: phase.name)
def test_advance_takes_every_transition_of_the_table(phase: Phase, to: Phase) -> None:
    assert advance(phase, to) is to


@pytest.mark.parametrize(("phase", "to"), FORBIDDEN, ids=lambda phase: phase.name)
def test_advance_refuses_every_other_change(phase: Phase, to: Phase) -> None:
    with pytest.raises(IllegalTransition, match=f"from {phase.name} to {to.name}"):
        advance(phase, to)


def test_the_table_names_every_phase() -> None:
    assert set(TRANSITIONS) == set(Phase)


def test_every_phase_is_reached_from_new_and_reaches_closed() -> None:
    """No phase is dead code and none is a trap: a connection can be in each, and leave each for
    ``CLOSED`` (at once, but for ``NEW``: a socket is always asked about at accept first)."""
    reached, frontier = {Phase.NEW}, [Phase.NEW]
    while frontier:
        for to in TRANSITIONS[frontier.pop()]:
            if to not in reached:
                reached.add(to)
                frontier.append(to)
    assert reached == set(Phase)
    assert TRANSITIONS[Phase.CLOSED] == frozenset()
    assert [phase for phase in Phase if Phase.CLOSED not in TRANSITIONS[phase]] == [Phase.NEW, Phase.CLOSED]


def test_a_socket_gone_cannot_go_twice() -> None:
    """``connection_lost`` advances to ``CLOSED``: a second one would give back its places twice."""
    with pytest.raises(IllegalTransition):
        advance(advance(Phase.OPEN, Phase.CLOSED), Phase.CLOSED)


def test_the_module_s_diagram_draws_the_table() -> None:
    """The diagram in the module's docstring draws exactly the table: each of its lines a chain of
    changes (``A ──► B ──► C``), the changes to ``CLOSED`` said in words on the last."""
    doc = connection_state.__doc__
    assert doc is not None
    lines = [line.strip() for line in doc.split("::", 1)[1].splitlines() if "──►" in line]
    assert lines[-1] == "and every phase but NEW and CLOSED ──► CLOSED"
    drawn = set()
    for line in lines[:-1]:
        chain = [Phase[name.strip()] for name in line.split("──►")]
        drawn |= set(itertools.pairwise(chain))
    assert drawn == {pair for pair in ALLOWED if pair[1] is not Phase.CLOSED}
    assert {pair for pair in ALLOWED if pair[1] is Phase.CLOSED} == {
        (phase, Phase.CLOSED) for phase in Phase if phase not in (Phase.NEW, Phase.CLOSED)
    }
