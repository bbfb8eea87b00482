"""A full disk never kills the daemon: changes wait in memory, are written when space returns,
and agents the full disk killed are not crash-looped into `failed`."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Herd, make_repo, script, wait_until

from agentherd.sessions.records import Event, RunRecord, SessionRecord, TaskRecord
from agentherd.sessions.states import State
from agentherd.supervisor.files.store import Change, Store


def event(kind: str, message: str = "") -> Event:
    return Event(at="2026-01-01T00:00:00.000Z", session="a", kind=kind, message=message)


def test_a_commit_the_disk_refuses_is_held_then_written_in_order(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    store.commit(Change(session=SessionRecord(name="a"), events=(event("first"),)))
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages}")  # sqlite answers SQLITE_FULL now

    task = TaskRecord(handle="a/1", session="a", first_run=1, state=State.RUNNING, started_at="t")
    run = RunRecord(session="a", run=1, handle="a/1", argv=["x"], mode="command", tag="t")
    record = SessionRecord(name="a", run=1, handle="a/1")
    held = store.commit(
        Change(session=record, run=run, task=task, events=(event("big", "x" * 200_000),))
    )
    assert held[0].seq == 0 and store.unavailable  # no seq yet: not written
    assert not store._db.in_transaction, "a failed COMMIT must not leave its transaction open"
    store.commit(Change(session=record, events=(event("after"),)))
    # Reads see what is held, as the daemon's own state does.
    assert store.task("a/1") == task and store.run("a", 1) == run
    assert store.runs("a") == [run] and store.sessions()["a"].handle == "a/1"
    assert [e.kind for e in store.events()] == ["first"]
    assert not store.retry()

    store._db.execute("PRAGMA max_page_count = 1073741823")  # space returns
    assert store.retry() and not store.unavailable
    assert [e.kind for e in store.events()] == ["first", "big", "after"]
    assert store.task("a/1") == task and store.sessions()["a"].run == 1
    outage = store.take_recovery()
    assert outage is not None and outage.held_changes == 2 and "full" in outage.error
    assert store.take_recovery() is None
    assert store._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    store.close()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs (root and a private mount namespace: the unshare harness gives both)."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)])
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Write one file until the disk refuses more."""
    filler = disk / "filler"
    with open(filler, "wb") as handle, contextlib.suppress(OSError):
        while True:
            handle.write(b"\0" * 65536)
            handle.flush()
    return filler


CHATTY = script("""
    import sys, time
    while True:
        print("working " * 20, flush=True)  # dies when its log's disk is full
        time.sleep(0.01)
""")


def test_disk_full_keeps_the_daemon_up_pauses_restarts_and_catches_up(
    small_disk: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    repo = make_repo(tmp_path / "repo")
    herd = Herd(small_disk).write(f"""
        [[session]]
        name = "a"
        cwd = "{repo}"
        command = {CHATTY}
        restart = "on-failure"
        restart_delay = 0
        max_crashes = 2
        stop_grace = "2s"
    """)
    try:
        client = herd.start()
        client.call("start", name="a")
        herd.wait_state("a", "running")
        filler = fill(small_disk)
        status = herd.wait_state("a", "backoff")
        assert status["reason"] == "disk-full"
        assert any("database or disk is full" in r.getMessage() for r in caplog.records), (
            "the daemon log says the disk refused a write"
        )
        # Nothing is restarted into a full disk, however often the reconcile pass comes.
        passes = client.call("info")["reconcile_passes"]
        wait_until(lambda: client.call("info")["reconcile_passes"] >= passes + 5)
        status = herd.status("a")
        assert (status["state"], status["reason"], status["run"]) == ("backoff", "disk-full", 1)

        filler.unlink()  # space returns
        herd.wait_state("a", "running")
        assert herd.status("a")["run"] == 2
        # The tick after the held changes were written says so (a restart may come first).
        wait_until(lambda: "disk-full" in [e["kind"] for e in herd.events()], what="disk-full")
        kinds = [e["kind"] for e in herd.events()]
        assert "failed" not in kinds
        assert (
            kinds.index("run-exited") < kinds.index("restart-scheduled") < kinds.index("disk-full")
        )
        seqs = [e["seq"] for e in herd.events()]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        herd.down()
        with sqlite3.connect(small_disk / ".herd" / "state.db") as db:
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        herd.down()
