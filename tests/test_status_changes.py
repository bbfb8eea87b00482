"""`subscribe` with `changes`: one full snapshot, then only what changed, in sequence.

The dashboard of a 200-session fleet used to get every status twenty times a second; these
tests hold the daemon to sending what changed only, and the dashboard's feed to re-syncing
from a full snapshot when it misses a message.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import Herd, make_repo, script, wait_until

from agentherd.supervisor.api.client import AsyncClient
from agentherd.tui.dashboard.fleetfeed import FleetMirror, Resync, follow_snapshots
from agentherd.tui.dashboard.messages import Snapshot

CHATTY = script(
    """
    import time
    for i in range(10**6):
        print('line', i, flush=True)
        time.sleep(0.2)
    """
)
"""A line every 0.2 s: its session changes all the time."""

WAIT_S = 20.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def fleet_toml(root: Path, names: list[str]) -> str:
    """Sessions running CHATTY, none started by the daemon itself."""
    blocks = []
    for name in names:
        repo = root / name
        if not repo.exists():
            make_repo(repo)
        blocks.append(f'[[session]]\nname = "{name}"\ncwd = "{repo}"\ncommand = {CHATTY}\n')
    return "\n".join(blocks)


async def next_item(stream: AsyncIterator[Any]) -> dict[str, Any]:
    with anyio.fail_after(WAIT_S):
        item: dict[str, Any] = await stream.__anext__()
    return item


@pytest.mark.anyio
async def test_after_a_full_snapshot_only_changed_sessions_are_sent_in_sequence(
    herd: Herd,
) -> None:
    """Starting `a` sends `a` only; `b`, whose version moved with no visible change, and the
    idle `c` send nothing; sequence numbers go up by one."""
    herd.write(fleet_toml(herd.root, ["a", "b", "c"]))
    client = herd.start()
    assert herd.daemon is not None
    for name in ("a", "b", "c"):  # the first look at each repo is done: the fleet is at rest
        wait_until(lambda n=name: herd.status(n)["checkpoint"], what=f"{name}'s first commit")
    stream = AsyncClient(herd.daemon.socket_path).stream("subscribe", changes=True)
    first = await next_item(stream)
    assert first["full"] is True and first["seq"] == 1
    assert [s["session"] for s in first["sessions"]] == ["a", "b", "c"]
    assert all("fleet" not in s for s in first["sessions"])  # once per message, not per session

    herd.daemon.sessions["b"].touch()  # a new version, the same status
    await anyio.to_thread.run_sync(lambda: client.call("start", name="a"))
    seqs, named, items = [first["seq"]], [], []
    while True:
        item = await next_item(stream)
        seqs.append(item["seq"])
        items.append(item)
        named += [s["session"] for s in item["changed"]] + item["removed"]
        last = {s["session"]: s for s in item["changed"]}.get("a")
        if last is not None and last["state"] == "running" and "line" in last["last_line"]:
            break
    assert set(named) == {"a"}, (first, items)
    assert seqs == list(range(1, len(seqs) + 1))
    await stream.aclose()


@pytest.mark.anyio
async def test_a_session_removed_from_herd_toml_disappears(herd: Herd) -> None:
    """After a reload drops `c`, a message names it removed, and the mirror forgets it; a
    session added later comes in its herd.toml place."""
    herd.write(fleet_toml(herd.root, ["a", "b", "c"]))
    client = herd.start()
    assert herd.daemon is not None
    stream = AsyncClient(herd.daemon.socket_path).stream("subscribe", changes=True)
    mirror = FleetMirror()
    mirror.apply(await next_item(stream))
    assert list(mirror.statuses) == ["a", "b", "c"]

    herd.write(fleet_toml(herd.root, ["a", "b"]))
    await anyio.to_thread.run_sync(lambda: client.call("reload"))
    while True:
        item = await next_item(stream)
        changed = mirror.apply(item)
        if item["removed"]:
            break
    assert item["removed"] == ["c"]
    assert changed is not None and "c" in changed
    assert list(mirror.statuses) == ["a", "b"]

    herd.write(fleet_toml(herd.root, ["c", "a", "b"]))
    await anyio.to_thread.run_sync(lambda: client.call("reload"))
    while "c" not in mirror.statuses:
        mirror.apply(await next_item(stream))
    assert list(mirror.statuses) == list(herd.daemon.sessions)
    await stream.aclose()


def test_a_missed_change_message_asks_for_a_full_snapshot() -> None:
    """Applying change 3 after 1 would leave the mirror wrong without anyone noticing."""
    mirror = FleetMirror()
    mirror.apply({"seq": 1, "full": True, "sessions": [], "fleet": None})
    mirror.apply({"seq": 2, "changed": [], "removed": []})
    with pytest.raises(Resync):
        mirror.apply({"seq": 4, "changed": [], "removed": []})
    with pytest.raises(Resync):
        FleetMirror().apply({"seq": 5, "changed": [], "removed": []})  # no snapshot yet


class LosingClient:
    """The real client, except that the second message of the first subscription is lost."""

    def __init__(self, socket_path: Path) -> None:
        self.real = AsyncClient(socket_path)
        self.subscriptions = 0

    async def stream(self, op: str, **args: Any) -> AsyncIterator[Any]:
        self.subscriptions += 1
        lose = self.subscriptions == 1
        index = 0
        async for item in self.real.stream(op, **args):
            index += 1
            if lose and index == 2:
                continue
            yield item


@pytest.mark.anyio
async def test_the_dashboard_feed_resyncs_after_a_lost_message(herd: Herd) -> None:
    """The feed notices the gap, subscribes again, and what it posts matches the daemon."""
    herd.write(fleet_toml(herd.root, ["a", "b"]))
    client = herd.start()
    assert herd.daemon is not None
    losing = LosingClient(herd.daemon.socket_path)
    posted: list[Snapshot] = []

    def post(message: Any) -> bool:
        if isinstance(message, Snapshot):
            posted.append(message)
        return True

    async with anyio.create_task_group() as group:
        group.start_soon(follow_snapshots, losing, post)
        with anyio.fail_after(WAIT_S):
            while not posted:
                await anyio.sleep(0.01)
        await anyio.to_thread.run_sync(lambda: client.call("start", name="a"))
        with anyio.fail_after(WAIT_S):
            while sum(1 for p in posted if p.changed is None) < 2:
                await anyio.sleep(0.01)  # the re-sync's full snapshot: every row
        resynced = {s.session: s for s in posted[-1].sessions}
        group.cancel_scope.cancel()
    truth = await anyio.to_thread.run_sync(lambda: client.call("status", target="a"))
    assert losing.subscriptions == 2
    assert resynced["a"].run == truth["run"] and resynced["a"].handle == truth["handle"]
    assert resynced["b"].state == "idle"


@pytest.mark.anyio
async def test_rows_named_in_queued_snapshots_all_show_their_change(tmp_path: Path) -> None:
    """Two snapshots, each naming one changed row, posted before the app handles either: the
    newer replaces the older in the queue, and both rows still show their new last output."""
    from snapshot_fleet import ReplayClient, statuses, write_logs
    from test_dashboard import cell, until

    from agentherd.tui.dashboard.app import HerdApp
    from agentherd.tui.dashboard.widgets import SessionTable

    app = HerdApp(client=ReplayClient(write_logs(tmp_path)))
    async with app.run_test(size=(160, 40)) as pilot:
        table = app.query_one(SessionTable)
        await until(pilot, lambda: table.row_count == 6, "rows")
        # The last outputs are cut to the room left once the table is laid out; a snapshot
        # before that re-cuts every row anyway.
        await until(pilot, lambda: table._fitted_width == table._last_width(), "fitted")
        first, second = list(table._order)[:2]
        now = {s.session: s for s in statuses()}
        now[first] = now[first].model_copy(update={"last_line": "first is new"})
        app.post_message(Snapshot(list(now.values()), {first}))
        now[second] = now[second].model_copy(update={"last_line": "second is new"})
        app.post_message(Snapshot(list(now.values()), {second}))
        await until(pilot, lambda: "second is new" in cell(app, second, "last"), "second")
        assert "first is new" in cell(app, first, "last")


@pytest.mark.anyio
async def test_a_narrower_terminal_leaves_no_table_to_scroll_sideways(tmp_path: Path) -> None:
    """The last output column widens as lines come and does not narrow for each shorter one;
    when the terminal narrows, it narrows too, so the whole row still fits on screen."""
    from snapshot_fleet import ReplayClient, write_logs
    from test_dashboard import until

    from agentherd.tui.dashboard.app import HerdApp
    from agentherd.tui.dashboard.widgets import SessionTable

    app = HerdApp(client=ReplayClient(write_logs(tmp_path)))
    async with app.run_test(size=(200, 40)) as pilot:
        table = app.query_one(SessionTable)
        await until(pilot, lambda: table.row_count == 6, "rows")
        await until(pilot, lambda: table._fitted_width == table._last_width(), "fitted")
        wide = table.virtual_size.width
        await pilot.resize_terminal(130, 40)
        await until(
            pilot,
            lambda: table.virtual_size.width <= table.scrollable_content_region.width,
            f"the table to fit in 130 columns (it was {wide} wide)",
        )
        assert table.max_scroll_x == 0
