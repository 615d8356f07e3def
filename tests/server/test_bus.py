"""The relay bus of ``serve --workers N``: its framing on a byte stream, its event encoding (refusing
what is not an event), and two `RelayBus` ends on a socketpair (the supervisor in between is
exercised with real processes in test_workers.py)."""

from __future__ import annotations

import asyncio
import socket

import msgpack  # type: ignore[import-untyped]
import pytest

from server.play.bus import (
    MAX_FRAME_BYTES,
    BusEvent,
    Event,
    FrameReader,
    QuickRaceEvent,
    RaceEvent,
    RelayBus,
    frame,
    pack_event,
    unpack_event,
)
from tests.support.waiting import eventually

EVENTS = [
    BusEvent("node-1-w1", "g1", 1, "t1c5"),
    BusEvent("node-1-w2", "g2", 7, None, 1_700_000_000_000),
    BusEvent("n", "g" * 32, 10_000, "t8f", None),
]
RACE_EVENTS = [RaceEvent("node-1-w1", "r1", 1), RaceEvent("n", "r" * 32, 10_000)]
QUICK_RACE_EVENTS = [QuickRaceEvent("node-1-w1", "r1", ("w1", "w2")), QuickRaceEvent("n", "r", ())]


@pytest.mark.parametrize("event", [*EVENTS, *RACE_EVENTS, *QUICK_RACE_EVENTS])
def test_an_event_survives_packing(event: Event) -> None:
    assert unpack_event(pack_event(event)) == event


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xc1",  # never used in msgpack
        msgpack.packb(["n", "g", 1, "t1c5"]),  # a field short
        msgpack.packb(["n", "g", "1", "t1c5", None]),  # v as text
        msgpack.packb(["n", "g", True, "t1c5", None]),  # a bool is no version
        msgpack.packb(["n", 5, 1, "t1c5", None]),
        msgpack.packb(["n", "g", 1, 3, None]),
        msgpack.packb(["n", "g", 1, None, 1.5]),
        msgpack.packb({"node": "n"}),
        msgpack.packb(["n", "r"]),  # a race's event a field short
        msgpack.packb(["n", "r", "1"]),  # its revision as text
        msgpack.packb(["n", "r", False]),  # a bool is no revision
        msgpack.packb(["n", None, 1]),
        msgpack.packb(["n", "r", 1, None]),  # four fields: neither shape
        msgpack.packb(["n", "r", ["w1", 2]]),  # a quick race's wait that is no id
        msgpack.packb(["n", 5, ["w1"]]),
    ],
)
def test_what_is_not_an_event_is_refused(data: bytes) -> None:
    with pytest.raises(ValueError, match="not a bus event"):
        unpack_event(data)


def test_frames_come_out_whole_however_the_stream_is_cut() -> None:
    payloads = [pack_event(event) for event in EVENTS] + [b""]
    stream = b"".join(frame(payload) for payload in payloads)
    for size in (1, 2, 3, 5, 64, len(stream)):
        reader = FrameReader()
        received = [
            p for start in range(0, len(stream), size) for p in reader.feed(stream[start : start + size])
        ]
        assert received == payloads, size


def test_a_frame_announcing_more_than_the_limit_is_refused() -> None:
    reader = FrameReader()
    assert reader.feed(frame(b"x" * MAX_FRAME_BYTES)) == [b"x" * MAX_FRAME_BYTES]
    with pytest.raises(ValueError, match="a relay frame of 65537 bytes"):
        reader.feed((MAX_FRAME_BYTES + 1).to_bytes(4, "big"))


async def test_two_relay_ends_deliver_each_others_events_in_order() -> None:
    left_sock, right_sock = socket.socketpair()
    left_got: list[Event] = []
    right_got: list[Event] = []
    left, right = RelayBus(left_sock), RelayBus(right_sock)
    await left.start(left_got.append)
    await right.start(right_got.append)
    sent: list[Event] = [BusEvent("a", "g", v, "t1c5") for v in range(1, 201)]
    sent.insert(100, RaceEvent("a", "r", 3))  # a race's event keeps its place among the games' events
    sent.insert(150, QUICK_RACE_EVENTS[0])
    for event in sent:
        left.publish(event)
    right.publish(EVENTS[1])
    await eventually(lambda: len(right_got) >= len(sent) and bool(left_got), "both ends got every event")
    assert right_got == sent and left_got == [EVENTS[1]]
    await left.close()
    await right.close()


async def test_a_relay_end_says_when_the_other_end_is_gone_and_skips_garbage() -> None:
    mine, theirs = socket.socketpair()
    lost = asyncio.Event()
    got: list[Event] = []
    bus = RelayBus(mine, on_lost=lost.set)
    await bus.start(got.append)
    theirs.sendall(frame(b"\xc1") + frame(pack_event(EVENTS[0])))  # a malformed event, then a good one
    await eventually(lambda: bool(got), "the good event after the malformed one arrives")
    assert got == [EVENTS[0]]
    theirs.close()
    await asyncio.wait_for(lost.wait(), 10)
    bus.publish(EVENTS[1])  # after the loss: dropped, not raised
    await bus.close()


async def test_a_corrupt_relay_stream_is_closed() -> None:
    mine, theirs = socket.socketpair()
    lost = asyncio.Event()
    bus = RelayBus(mine, on_lost=lost.set)
    await bus.start(lambda event: None)
    theirs.sendall(b"\xff\xff\xff\xff")  # a 4 GiB frame
    await asyncio.wait_for(lost.wait(), 10)
    await bus.close()
    theirs.close()
