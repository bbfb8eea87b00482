"""Once a run has ended, its capped log is compacted to the bytes it keeps: its size is what it
holds, so `cp`, `tar` or a backup reads no gigabytes of zeros; readers of it stay right."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from conftest import Herd, script, wait_until
from test_line_map import punch_or_skip
from textual.app import App, ComposeResult

from agentherd.supervisor.files import logcap
from agentherd.supervisor.files.tailer import LogTailer
from agentherd.tui.cli.follow import Printer, print_run
from agentherd.tui.dashboard.line_map import LineMap
from agentherd.tui.dashboard.logfile import LineIndex, LineReader
from agentherd.tui.dashboard.run_lines import RunLines

MIB = 1 << 20
CAP_BYTES = 1 << 20
MARKER_BYTES = 80
"""At most the length of the marker line that stands where output was dropped."""

FLOOD = script("""
    import os
    line = b"x" * 8191 + b"\\n"
    print("FIRST LINE", flush=True)
    for _ in range(64 * 128):  # 64 MiB as fast as it goes
        os.write(1, line)
    os.write(1, b"LAST LINE\\n")
""")


def punched_log(path: Path, head: int = 64 << 10, hole: int = 3 << 20) -> bytes:
    """A log of numbered lines whose middle the cap punched out; returns its bytes as written."""
    data = b"".join(b"line %06d " % i + b"x" * 89 + b"\n" for i in range(40_000))
    path.write_bytes(data)
    punch_or_skip(path, head, hole)
    return data


def test_an_ended_runs_punched_log_is_rewritten_as_the_bytes_it_keeps(tmp_path: Path) -> None:
    path = tmp_path / "output.log"
    data = punched_log(path)
    os.chmod(path, 0o640)
    os.utime(path, ns=(1_000_000_000, 2_000_000_000))
    before = path.stat()
    assert before.st_size == len(data) and before.st_blocks * 512 < before.st_size

    assert logcap.compact(path) == 3 << 20
    after = path.stat()
    kept = data[: 64 << 10] + data[(64 << 10) + (3 << 20) :]
    marker = b"\n[herd: 3145728 bytes of output dropped here (log_max_bytes)]\n"
    assert path.read_bytes() == data[: 64 << 10] + marker + data[(64 << 10) + (3 << 20) :]
    assert after.st_size == len(kept) + len(marker)  # no holes left: its size is its bytes
    assert after.st_blocks * 512 >= after.st_size
    assert stat.S_IMODE(after.st_mode) == 0o640 and after.st_mtime_ns == 2_000_000_000
    assert [p.name for p in tmp_path.iterdir()] == ["output.log"]  # no copy left beside it
    assert logcap.compact(path) == 0 and path.stat().st_ino == after.st_ino  # once is enough


def test_a_compaction_stopped_midway_leaves_the_log_as_it_was(tmp_path: Path) -> None:
    """The daemon going down ends its copies: the log stays punched for the next daemon."""
    path = tmp_path / "output.log"
    data = punched_log(path)
    inode = path.stat().st_ino
    with pytest.raises(logcap.CompactionStopped):
        logcap.compact(path, stop=lambda: True)
    assert path.stat().st_ino == inode and path.stat().st_size == len(data)
    assert [p.name for p in tmp_path.iterdir()] == ["output.log"]


def test_only_a_punched_regular_log_is_compacted(tmp_path: Path) -> None:
    whole = tmp_path / "whole.log"
    whole.write_bytes(b"all here\n" * 1000)
    inode = whole.stat().st_ino
    assert logcap.compact(whole) == 0 and whole.stat().st_ino == inode
    target = tmp_path / "person.txt"
    punched_log(target)
    link = tmp_path / "output.log"
    link.symlink_to(target)
    assert logcap.compact(link) == 0 and link.is_symlink()
    assert target.stat().st_blocks * 512 < target.stat().st_size  # the person's file untouched


def test_a_follower_at_the_end_of_an_ended_log_does_not_print_it_again(tmp_path: Path) -> None:
    """`herd logs -f` on a run that ended keeps to the file it read: the compact copy that
    replaces it is the same output, not new output."""
    path = tmp_path / "output.log"
    punched_log(path)
    tailer = LogTailer(path, reopen_replaced=False)
    while tailer.read_new(1 << 20):
        pass
    logcap.compact(path)
    assert tailer.read_new() == b""
    tailer.close()


def test_the_dashboard_reads_a_compacted_log_anew(tmp_path: Path) -> None:
    """The output view indexed the punched log; the compact copy is a new file, indexed and
    read from its start (the old offsets would land in the wrong lines)."""
    path = tmp_path / "output.log"
    punched_log(path)
    index = LineIndex(path, 1024)
    line_map = LineMap(path, 1024)
    line_map.grow(index.step(1 << 30))
    logcap.compact(path)
    step = index.step(1 << 30)
    assert step.restart
    line_map.grow(step)
    lines = path.read_bytes().split(b"\n")
    assert line_map.line_count == len(lines) - 1
    reader = LineReader(path)
    last = line_map.line_count - 1
    assert reader.read(line_map.start_of(last), line_map.end_of(last)) == b"line 039999 " + (
        b"x" * 89
    )
    reader.close()
    line_map.close()


def test_an_index_part_way_through_a_log_starts_over_when_the_log_is_compacted(
    tmp_path: Path,
) -> None:
    """Compacted while the output view had indexed only its start (the copy may be longer than
    that): the index starts over on the new file, never counts on from the old one's offset."""
    path = tmp_path / "output.log"
    punched_log(path)
    index = LineIndex(path, 1024)
    index.step(16 << 10)
    logcap.compact(path)
    assert path.stat().st_size > 16 << 10
    step = index.step(1 << 30)
    assert step.restart and step.complete == path.read_bytes().count(b"\n")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_the_output_view_reads_lines_from_the_compacted_log(tmp_path: Path) -> None:
    """Its lines are read by offset from the file it opened: the compact copy is opened anew."""
    path = tmp_path / "output.log"
    punched_log(path)

    app = LinesApp()
    async with app.run_test():
        view = app.query_one(RunLines)
        view.open(path)
        index = LineIndex(path)
        view.grow(index.step(1 << 30))
        logcap.compact(path)
        view.grow(index.step(1 << 30))
        last = view.line_count - 1
        assert view.line_bytes(last) == b"line 039999 " + b"x" * 89
        assert view.line_bytes(0) == b"line 000000 " + b"x" * 89


class LinesApp(App[None]):
    """Just the output view's lines widget."""

    def compose(self) -> ComposeResult:
        yield RunLines()


def test_a_reader_of_a_running_log_is_told_where_output_was_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before its run ends the log keeps its holes: `herd logs` passes over them and says so."""
    path = tmp_path / "output.log"
    punched_log(path)
    print_run(path, Printer(readable=False), None, terminal=False)
    printed = capsys.readouterr()
    assert "-- herd: 3145728 bytes dropped here (log_max_bytes) --" in printed.err
    assert "\0" not in printed.out and printed.out.endswith("line 039999 " + "x" * 89 + "\n")


def test_a_flooded_log_is_compacted_once_its_run_ended(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "flood"
        command = {FLOOD}
        restart = "never"
        log_max_bytes = {CAP_BYTES}
    """).start()
    herd.client.call("start", name="flood")
    herd.wait_state("flood", "completed", timeout_s=60)
    log = herd.root / ".herd" / "runs" / "flood" / "1" / "output.log"
    # The cap held on disk while it ran; once it ended its size is what it keeps too.
    wait_until(lambda: log.stat().st_size <= CAP_BYTES + MARKER_BYTES, what="the log compacted")
    info = log.stat()
    assert info.st_blocks * 512 >= info.st_size, "holes are left in the ended log"
    data = log.read_bytes()
    assert data.startswith(b"FIRST LINE\n") and data.endswith(b"LAST LINE\n")
    assert data.count(b"bytes of output dropped here (log_max_bytes)]\n") == 1
    printed = herd.cli("logs", "flood")
    assert printed.returncode == 0 and printed.stdout.encode() == data
    assert herd.status("flood")["logs"]["bytes"] <= CAP_BYTES + MARKER_BYTES


def test_an_ended_log_left_punched_is_compacted_by_the_next_daemon(herd: Herd) -> None:
    """A daemon that stopped before compacting (or an older herd) left a punched log: the next
    daemon compacts it, without a new run."""
    herd.write("""
        [[session]]
        name = "a"
        command = ["echo", "done"]
        restart = "never"
    """).start()
    herd.client.call("start", name="a")
    herd.wait_state("a", "completed")
    herd.stop_daemon()
    log = herd.root / ".herd" / "runs" / "a" / "1" / "output.log"
    punched_log(log)
    herd.start()
    wait_until(lambda: log.stat().st_blocks * 512 >= log.stat().st_size, what="the compaction")
    assert b"3145728 bytes of output dropped here" in log.read_bytes()
