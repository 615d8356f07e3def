"""How fast the browser client draws a burst of diffs, in Debian's Chromium against a real server.

The page opens a game of EO1-C8-AAAAAFA; another connection of the same player plays a line of
``MOVES`` random legal moves (seeded; an undo where none is left) as fast as the server acknowledges
them, so the page receives that many diffs in a burst. Measured: when the server has acknowledged
the last move (the baseline, in the same run) and when the page shows that version; reported with
their ratio. ``--runs`` repeats it.

Run: ``.venv/bin/python -m bench.bench_web_burst``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from typing import Any

from playwright.async_api import Browser, async_playwright
from websockets.asyncio.client import ClientConnection, connect

from engine import UNDO, Game, Move
from server.app import App
from server.config import Settings

CODE = "EO1-C8-AAAAAFA"
MOVES = 240
CHROMIUM = "/usr/bin/chromium"  # Debian's, as in tests/web
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]


def random_line(seed: int) -> list[Move | None]:
    """``MOVES`` actions from the opening of ``CODE``: a legal move picked at random, or an undo
    (None) where no move is left."""
    rng = random.Random(seed)
    game = Game.from_code(CODE)
    line: list[Move | None] = []
    while len(line) < MOVES:
        moves = sorted(game.legal_moves, key=str)
        action = rng.choice(moves) if moves else None
        game.play(action if action is not None else UNDO)
        line.append(action)
    return line


async def request(ws: ClientConnection, message: dict[str, Any]) -> dict[str, Any]:
    """Send a request (JSON subprotocol) and return its reply, skipping pushes."""
    await ws.send(json.dumps(message))
    while True:
        reply: dict[str, Any] = json.loads(await ws.recv())
        if reply.get("id") == message["id"]:
            return reply


async def one_burst(browser: Browser, port: int, line: list[Move | None]) -> tuple[float, float]:
    context = await browser.new_context(viewport={"width": 1280, "height": 860})
    page = await context.new_page()
    await page.goto(f"http://127.0.0.1:{port}/")
    await page.fill("#name-input", "Bench")
    await page.click("#name-save")
    await page.wait_for_selector('#player-name[data-player-id]:not([data-player-id=""])')
    await page.fill("#code", CODE)
    await page.click("#new-game")
    await page.wait_for_selector('#board[data-v="0"]')
    game = await page.get_attribute("#board", "data-game")
    token = await page.evaluate("localStorage.getItem('eightoff.token')")
    async with connect(f"ws://127.0.0.1:{port}/ws", subprotocols=["eightoff.v1.json"]) as ws:  # type: ignore[list-item]
        await request(ws, {"type": "hello", "id": 0, "protocol": 1, "token": token})
        await request(ws, {"type": "resume", "id": 1, "game": game})
        start = time.perf_counter()
        for index, move in enumerate(line, 2):
            fields: dict[str, Any] = {"type": "undo"}
            if move is not None:
                fields = {"type": "move", "from": str(move.source), "to": str(move.target)}
                if move.count > 1:
                    fields["n"] = move.count
            reply = await request(ws, {"id": index, "game": game, **fields})
            assert reply["type"] == "ack", reply
        acked = time.perf_counter() - start
        await page.wait_for_selector(f'#board[data-v="{len(line)}"]', timeout=120_000)
        drawn = time.perf_counter() - start
    await context.close()
    return acked, drawn


async def main(runs: int) -> None:
    line = random_line(seed=1)
    with tempfile.TemporaryDirectory() as folder:
        app = await App.start(
            Settings(host="127.0.0.1", port=0, database_url=f"sqlite+aiosqlite:///{folder}/bench.sqlite3")
        )
        try:
            async with async_playwright() as playwright:
                browser = await playwright.chromium.launch(
                    executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
                )
                results = [await one_burst(browser, app.port, line) for _ in range(runs)]
                await browser.close()
        finally:
            await app.shutdown()
    print(f"{len(line)} diffs in a burst, {runs} runs")
    print("run | server acked the last (baseline) | page drew the last | ratio")
    for index, (acked, drawn) in enumerate(results, 1):
        print(f"{index:3} | {acked:8.3f} s | {drawn:8.3f} s | {drawn / acked:5.2f}")
    print(f"median ratio {statistics.median(drawn / acked for acked, drawn in results):.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    asyncio.run(main(parser.parse_args().runs))
