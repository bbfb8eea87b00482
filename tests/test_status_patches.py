"""`subscribe` with `changes` and `patches`: a session's output sends only what output changes.

With 200 busy agents a subscribed dashboard raised the daemon's CPU by half: every line read
built the whole status again (plan, progress, warnings, spend), and it was encoded, sent,
decoded and validated whole. These tests hold the daemon to sending only the fields that differ
for a session the subscriber already has, and the dashboard's mirror to ending up with the same
status the daemon reports.
"""

from __future__ import annotations

import anyio
import pytest
from conftest import Herd, wait_until
from test_status_changes import fleet_toml, next_item

from agentherd.supervisor.api.client import AsyncClient
from agentherd.tui.dashboard.fleetfeed import FleetMirror, Resync


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_output_lines_send_only_the_output_fields(herd: Herd) -> None:
    """While `a` prints, its messages patch `last_line` and `logs` and nothing else; the
    mirror's `a` then agrees with `herd status a` on everything but the newest line."""
    herd.write(fleet_toml(herd.root, ["a", "b"]))
    client = herd.start()
    assert herd.daemon is not None
    for name in ("a", "b"):  # each repo's first look is done (the boot defers it): at rest
        wait_until(lambda n=name: herd.status(n)["checkpoint"], what=f"{name}'s first commit")
    stream = AsyncClient(herd.daemon.socket_path).stream("subscribe", changes=True, patches=True)
    mirror = FleetMirror()
    mirror.apply(await next_item(stream))
    await anyio.to_thread.run_sync(lambda: client.call("start", name="a"))
    running = False
    output_patches = 0
    while output_patches < 3:
        item = await next_item(stream)
        mirror.apply(item)
        running = running or mirror.statuses["a"].state == "running"
        for patch in item.get("patched", []):
            assert patch["session"] == "a"
            if running and set(patch) - {"session"} <= {"last_line", "logs"}:
                output_patches += 1
    await stream.aclose()
    truth = await anyio.to_thread.run_sync(lambda: client.call("status", target="a"))
    mirrored = mirror.statuses["a"].to_json()
    for key in ("last_line", "logs", "fleet"):
        truth.pop(key, None), mirrored.pop(key, None)  # they move on between the two reads
    assert mirrored == truth
    assert "line" in mirror.statuses["a"].last_line


@pytest.mark.anyio
async def test_a_subscriber_without_patches_gets_whole_statuses(herd: Herd) -> None:
    """An older dashboard (no `patches`) never gets a message it cannot read."""
    herd.write(fleet_toml(herd.root, ["a"]))
    client = herd.start()
    assert herd.daemon is not None
    stream = AsyncClient(herd.daemon.socket_path).stream("subscribe", changes=True)
    await next_item(stream)
    await anyio.to_thread.run_sync(lambda: client.call("start", name="a"))
    lines = 0
    while lines < 3:
        item = await next_item(stream)
        assert "patched" not in item
        for status in item["changed"]:
            assert {"state", "plan", "warnings", "last_line"} <= set(status)
            lines += "line" in status["last_line"]
    await stream.aclose()


def test_a_patch_for_a_session_never_sent_asks_for_a_full_snapshot() -> None:
    """A patch applies to what the mirror has; for a session it lacks, it cannot."""
    mirror = FleetMirror()
    mirror.apply({"seq": 1, "full": True, "sessions": [{"session": "a"}], "fleet": None})
    changed = mirror.apply(
        {"seq": 2, "changed": [], "removed": [], "patched": [{"session": "a", "restarts": 2}]}
    )
    assert changed == {"a"} and mirror.statuses["a"].restarts == 2
    with pytest.raises(Resync):
        mirror.apply({"seq": 3, "changed": [], "removed": [], "patched": [{"session": "b"}]})
