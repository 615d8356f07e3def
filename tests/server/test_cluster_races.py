"""Two nodes racing on one game (PostgreSQL + Redis, two servers): every change of a game passes the same
(game, v) fence, the database refuses actions of a finished game, and a (game, v) means one position on
every node and in the database."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy.exc import IntegrityError

from server.app import App
from server.ops.verify import check_stored_game
from server.play.replay import RESIGN, replay_stored
from server.storage import StoredGame, repository
from tests.support import serverutil
from tests.support.waiting import eventually
from tests.support.wsclient import WsClient

CODE = "EO1-C8-AAAAAFA"
TRIALS = 10


async def player(app: App, **hello: Any) -> WsClient:
    client = await WsClient.open(serverutil.ws_url(app))
    await client.hello(**hello)
    return client


async def stored(app: App, game: str) -> StoredGame:
    async with app.database.connection() as conn:
        found = await repository.load_game(conn, game)
    assert found is not None
    return found


async def test_no_move_is_acknowledged_after_a_resignation_on_another_node(
    two_nodes: tuple[App, App],
) -> None:
    """Defect 1: resign on node A and a move on node B at once; 7 of 10 moves were acknowledged and
    stored after game_over (status resigned beside later action rows; `eightoff verify` failed)."""
    node_a, node_b = two_nodes
    on_a = await player(node_a)
    on_b = await player(node_b, token=on_a.token)
    outcomes = []
    for _ in range(TRIALS):
        game = (await on_a.request("new_game", code=CODE))["game"]
        assert (await on_b.request("resume", game=game))["v"] == 0  # the game is in memory on both nodes
        resigned, moved = await asyncio.gather(
            on_a.request("resign", game=game), on_b.request("move", game=game, **{"from": "t1", "to": "c5"})
        )
        final = await stored(node_a, game)
        assert final.status == "resigned" or resigned["type"] == "error", (resigned, final)
        assert check_stored_game(final) is None, check_stored_game(final)  # `eightoff verify` agrees
        if resigned["type"] == "game_over":
            assert final.actions[-1] == RESIGN and RESIGN not in final.actions[:-1]
        if moved["type"] == "ack":  # an acknowledged move is stored, before any resignation
            assert final.actions[0] == "t1-c5", (moved, final.actions)
        else:
            assert moved["code"] in ("stale", "illegal_move"), moved
            assert "t1-c5" not in final.actions
        outcomes.append((resigned["type"], moved.get("code", moved["type"])))
    print(f"\nresign on A vs move on B: {outcomes}")
    for client in (on_a, on_b):
        await client.close()


async def test_the_database_refuses_an_action_of_a_finished_game(two_nodes: tuple[App, App]) -> None:
    """Whatever a node believes, an action row for a finished game is refused by the database."""
    node_a, _ = two_nodes
    owner = await player(node_a)
    game = (await owner.request("new_game", code=CODE))["game"]
    assert (await owner.request("resign", game=game))["type"] == "game_over"
    try:
        async with node_a.database.transaction() as conn:
            await repository.insert_actions(conn, [(game, 2, "t1-c5")])
    except IntegrityError as refused:
        assert "finished" in str(refused)
    else:
        raise AssertionError("the database stored an action of a finished game")
    await owner.close()


async def settled_snapshots(game: str, clients: list[WsClient]) -> list[dict[str, Any]]:
    """Each client's resume of ``game``, once every node has followed the last commit."""
    snapshots: list[dict[str, Any]] = []

    async def agreed() -> bool:
        snapshots[:] = [await client.request("resume", game=game) for client in clients]
        return len({snapshot["v"] for snapshot in snapshots}) == 1

    try:
        await eventually(agreed, "the nodes agree on v")
    except AssertionError as never:
        raise AssertionError(f"the nodes never agreed on v: {[s['v'] for s in snapshots]}") from never
    return snapshots


def position(snapshot: dict[str, Any]) -> tuple[object, ...]:
    return (snapshot["v"], snapshot["tableau"], snapshot["cells"], snapshot["foundations"], snapshot["score"])


async def test_a_version_means_one_position_on_every_node(two_nodes: tuple[App, App]) -> None:
    """Defect 2 across nodes: two different actions at the same v from two nodes; the losing node must
    neither show its own action nor keep a v whose content differs from the stored one."""
    node_a, node_b = two_nodes
    on_a = await player(node_a)
    on_b = await player(node_b, token=on_a.token)
    game = (await on_a.request("new_game", code=CODE))["game"]
    await on_b.request("resume", game=game)
    v = 0
    for trial in range(TRIALS):
        cell_index = 4 + trial % 4  # c5..c8: the empty cells of this deal
        cell = f"c{cell_index + 1}"
        from_a, from_b = await asyncio.gather(
            on_a.request("move", game=game, v=v, **{"from": "t1", "to": cell}),
            on_b.request("move", game=game, v=v, **{"from": "t2", "to": cell}),
        )
        acked = [reply for reply in (from_a, from_b) if reply["type"] == "ack"]
        assert len(acked) == 1, ("one of two actions at one version is stored", from_a, from_b)
        refused = from_b if acked[0] is from_a else from_a
        assert refused["code"] == "stale", refused
        snapshot_a, snapshot_b = await settled_snapshots(game, [on_a, on_b])
        replayed = replay_stored(await stored(node_a, game))
        assert position(snapshot_a) == position(snapshot_b), "one (game, v), two positions"
        assert snapshot_a["v"] == replayed.v == acked[0]["v"] == v + 1
        assert snapshot_a["cells"][cell_index] == acked[0]["ops"][0]["cards"][0], (
            "the stored card, not the other"
        )
        undone = await on_a.request("undo", game=game, v=v + 1)  # back to the same kind of position
        assert undone["type"] == "ack", undone
        v = (await settled_snapshots(game, [on_a, on_b]))[0]["v"]
    for client in (on_a, on_b):
        await client.close()
