"""The stall check judges silence by the run's output file, not by how far the follower has
read it: on a loaded machine the follower read an agent's lines after the check, and an agent
that kept writing was warned of as stalled (loaded CI runs). An agent silent on disk is still
warned of, once; output already read is no new activity, whatever its file's time says (a wall
clock set back: tests/test_clock_jump.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio

from agentherd.sessions.config import parse_config
from agentherd.sessions.open_warnings import WarningBook
from agentherd.sessions.records import Event, SessionRecord
from agentherd.sessions.states import State
from agentherd.supervisor.files.paths import OUTPUT_FILE
from agentherd.supervisor.session.liverun import output_written_at
from agentherd.supervisor.session.pen import Pen
from agentherd.supervisor.session.stallkeep import StallWatch

STALL_S = 60.0


def watch(tmp_path: Path, read: int) -> tuple[StallWatch, list[Event]]:
    """A running session with `stall = "60s"` whose run's output file in `tmp_path` the
    follower has read `read` bytes of; its committed events."""
    config = parse_config(
        '[[session]]\nname = "api"\ncommand = ["true"]\nbudget = { stall = "60s" }\n',
        tmp_path / "herd.toml",
    ).sessions[0]
    record = SessionRecord(name="api", state=State.RUNNING, handle="api/1", run=1)
    committed: list[Event] = []

    def event(kind: str, message: str, run: int | None = None, **data: Any) -> Event:
        return Event(at="2026-12-05T00:00:00Z", session="api", run=run, kind=kind, message=message)

    def commit(*events: Event, **_: Any) -> None:
        committed.extend(events)

    def unused(*_: Any, **__: Any) -> None:
        raise AssertionError("the stall check only commits")

    pen = Pen(record, anyio.Lock(), event, commit, unused, unused, unused, lambda: config)  # type: ignore[arg-type]

    live = SimpleNamespace(folder=tmp_path, tailer=SimpleNamespace(offset=read))
    stall = StallWatch(pen, WarningBook(), lambda *_: None, lambda: output_written_at(live))  # type: ignore[arg-type]
    stall.clock.last_activity_s = time.monotonic() - STALL_S - 5  # read nothing for 65 s
    return stall, committed


def test_output_written_but_not_read_yet_is_no_stall(tmp_path: Path) -> None:
    (tmp_path / OUTPUT_FILE).write_text("still working\n")  # written now, not read yet
    stall, committed = watch(tmp_path, read=0)
    stall.check()
    assert committed == []
    assert stall.clock.idle_s(time.monotonic()) < 5, "the write counts from when it was made"


def test_output_silent_on_disk_past_stall_is_warned_of_once(tmp_path: Path) -> None:
    output = tmp_path / OUTPUT_FILE
    output.write_text("the last line\n")
    old = time.time() - STALL_S - 5
    os.utime(output, (old, old))  # written 65 s ago
    stall, committed = watch(tmp_path, read=0)
    stall.check()
    stall.check()
    assert [e.kind for e in committed] == ["stalled"]
    assert committed[0].message.startswith("no output, progress entry or commit for 1m")


def test_output_read_already_is_no_activity_whatever_its_files_time(tmp_path: Path) -> None:
    (tmp_path / OUTPUT_FILE).write_text("the last line\n")  # its time: now
    stall, committed = watch(tmp_path, read=len("the last line\n"))
    stall.check()
    assert [e.kind for e in committed] == ["stalled"]
