"""How fast the browser client draws a burst of diffs, in Debian's Chromium against a real server.

The page opens a game of EO1-C8-AAAAAFA; another connection of the same player plays all but the
last move of a won line (239 moves) as fast as the server acknowledges them, so the page receives
239 diffs in a burst. Measured: when the server has acknowledged the last move (the baseline, in the
same run) and when the page shows that version; reported with their ratio. ``--runs`` repeats it.

Run: ``.venv/bin/python -m bench.bench_web_burst``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from playwright.async_api import async_playwright

from engine import Move
from server.app import App
from server.config import Settings

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))  # the test helpers import each other so
from tests.protocol.wire_support import WINNING_LINE
from tests.web.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.wsclient import WsClient

CODE = "EO1-C8-AAAAAFA"


async def one_burst(browser: object, port: int) -> tuple[float, float]:
    context = await browser.new_context(viewport={"width": 1280, "height": 860})  # type: ignore[attr-defined]
    page = await context.new_page()
    await page.goto(f"http://127.0.0.1:{port}/")
    await page.fill("#name-input", "Bench")
    await page.click("#name-save")
    await page.wait_for_selector('#player-name[data-player-id]:not([data-player-id=""])')
    await page.fill("#code", CODE)
    await page.click("#new-game")
    await page.wait_for_selector('#board[data-v="0"]')
    game = await page.get_attribute("#board", "data-game")
    other = await WsClient.open(f"ws://127.0.0.1:{port}/ws")
    await other.hello(token=await page.evaluate("localStorage.getItem('eightoff.token')"))
    await other.request("resume", game=game)
    line = [Move.parse(text) for text in WINNING_LINE[:-1]]
    start = time.perf_counter()
    for move in line:
        fields: dict[str, object] = {"from": str(move.source), "to": str(move.target)}
        if move.count > 1:
            fields["n"] = move.count
        reply = await other.request("move", game=game, **fields)
        assert reply["type"] == "ack", reply
    acked = time.perf_counter() - start
    await page.wait_for_selector(f'#board[data-v="{len(line)}"]', timeout=120_000)
    drawn = time.perf_counter() - start
    await other.close()
    await context.close()
    return acked, drawn


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        settings = Settings(
            host="127.0.0.1", port=0, database_url=f"sqlite+aiosqlite:///{folder}/bench.sqlite3"
        )
        app = await App.start(settings)
        try:
            async with async_playwright() as playwright:
                browser = await playwright.chromium.launch(
                    executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
                )
                results = [await one_burst(browser, app.port) for _ in range(runs)]
                await browser.close()
        finally:
            await app.shutdown()
    print(f"{len(WINNING_LINE) - 1} diffs in a burst, {runs} runs")
    print("run | server acked the last (baseline) | page drew the last | ratio")
    for index, (acked, drawn) in enumerate(results, 1):
        print(f"{index:3} | {acked:8.3f} s | {drawn:8.3f} s | {drawn / acked:5.2f}")
    print(f"median ratio {statistics.median(drawn / acked for acked, drawn in results):.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    asyncio.run(main(parser.parse_args().runs))
