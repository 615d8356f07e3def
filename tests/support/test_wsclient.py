"""The test client itself: a request loop that is cancelled stops, even while replies keep arriving."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.support import dbutil, serverutil
from tests.support.wsclient import WsClient

#: Loop iterations let run before the cancel: from "not started" to "the reply read and handed back",
#: every point at which a reply that is already buffered can meet the cancel.
CANCEL_POINTS = range(8)


async def test_a_cancelled_recv_is_cancelled_even_when_its_reply_is_already_there(tmp_path: Path) -> None:
    """The hint-flood test hung in a fresh clone: one of its 12 request loops, cancelled at the end,
    went on for ever (and kept the solver busy), so ``gather`` never returned. Python 3.11's
    ``asyncio.wait_for`` returns the inner result instead of raising when the cancel arrives after
    the inner ``recv`` finished but before ``wait_for`` resumed (CPython gh-86296, fixed in 3.12):
    the cancel is lost. Tried here: a reply buffered before each ``recv``, cancelled after 0 to 7
    loop iterations; a cancel the task accepted must end it cancelled."""
    with dbutil.fresh_database("sqlite", tmp_path, migrate=False) as url:
        async with serverutil.running_app(url) as app:
            client = await WsClient.open(serverutil.ws_url(app))
            await client.hello(name="Cancelled")
            lost: list[int] = []
            for point in CANCEL_POINTS:
                await client.send({"type": "profile", "id": 1000 + point})
                await asyncio.sleep(0.2)  # the reply is in the client's buffer
                receiving = asyncio.ensure_future(client.recv())
                for _ in range(point):
                    await asyncio.sleep(0)
                accepted = receiving.cancel()
                await asyncio.gather(receiving, return_exceptions=True)
                if accepted and not receiving.cancelled():
                    lost.append(point)
                    continue
                if not receiving.cancelled():  # it had its reply before the cancel: nothing to lose
                    continue
                await client.recv()  # the reply the cancelled recv did not take is still there
            assert lost == [], f"cancels lost after {lost} loop iterations"
            await client.close()
