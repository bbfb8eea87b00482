"""An agent's own files (Claude transcripts, Codex rollouts, Gemini chats) never flood the
daemon: a line of gigabytes or millions of short lines are read in bounded chunks, memory and
time, and a stop or `herd down` never waits for the read."""

from __future__ import annotations

import json
import re
import shutil
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Herd, make_repo, pid_gone, wait_until
from test_agent_usage_runs import FIXTURES, replay, run_usages, session

from agentherd.sessions.adapters import claude_tokens, gemini, jsonlines
from agentherd.sessions.adapters.claude_tokens import transcript_messages
from agentherd.sessions.adapters.claude_transcript import read_transcript
from agentherd.sessions.adapters.gemini import gemini_chat_tokens
from agentherd.sessions.adapters.jsonlines import json_lines
from agentherd.supervisor.files.store import Store

MIB = 1 << 20
CLAUDE_SESSION = "3c6dc9ee-9626-4943-9a2a-b53c4c69233a"
"""The session id the replayed Claude run prints (tests/fixtures/agents/real)."""
DAEMON_MAX_RSS_BYTES = 300 * MIB
"""What the daemon may reach while it reads any agent file (it starts at ~50 MB)."""
ASSISTANT_LINE = (
    b'{"type":"assistant","message":{"id":"msg_same","model":"claude-x","usage":'
    b'{"input_tokens":1,"output_tokens":2}},"timestamp":"2026-12-01T05:48:02.020Z"}\n'
)


def huge_line(path: Path, size_bytes: int, before: bytes = b"") -> Path:
    """`before`, then one line of `size_bytes` zeros (a sparse file: made at once, no disk)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as stream:
        stream.write(before)
        stream.seek(len(before) + size_bytes)
        stream.write(b"\n")
    return path


def short_lines(path: Path, count: int, distinct: bool = False) -> Path:
    """`count` short assistant lines with usage, written as a few big repeated buffers."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as stream:
        if not distinct:
            for start in range(0, count, 100_000):
                stream.write(ASSISTANT_LINE * min(100_000, count - start))
            return path
        for start in range(0, count, 100_000):
            stream.write(
                b"".join(
                    ASSISTANT_LINE.replace(b"msg_same", b"msg_%d" % index)
                    for index in range(start, min(count, start + 100_000))
                )
            )
    return path


# ----- the reader ------------------------------------------------------------------------------


def test_a_line_of_hundreds_of_megabytes_is_passed_over_in_chunks(tmp_path: Path) -> None:
    """A 300 MiB line costs the reader about a chunk, not the line; the lines around it count."""
    path = huge_line(tmp_path / "t.jsonl", 300 * MIB, before=b'{"n": 1}\n')
    with path.open("ab") as stream:
        stream.write(b'{"n": 2}\n')
    tracemalloc.start()
    try:
        values = list(json_lines([path], 512 * MIB, 4 * MIB, lambda raw: True))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert values == [{"n": 1}, {"n": 2}]
    assert peak < 8 * MIB, f"reading took {peak} bytes"


def test_the_byte_bound_holds_whatever_the_line_structure(tmp_path: Path) -> None:
    """No newline for gigabytes: the read ends at `max_bytes` (a 4 GB file is 0.05 s of it)."""
    path = huge_line(tmp_path / "t.jsonl", 4 << 30, before=b'{"n": 1}\n')
    started = time.monotonic()
    assert list(json_lines([path], 64 * MIB, 4 * MIB, lambda raw: True)) == [{"n": 1}]
    assert time.monotonic() - started < 10


def test_a_stopped_read_ends_between_chunks(tmp_path: Path) -> None:
    path = short_lines(tmp_path / "t.jsonl", 200_000)  # ~26 MiB
    asked = 0

    def stop() -> bool:
        nonlocal asked
        asked += 1
        return asked > 2

    read = sum(1 for _ in read_transcript(path, stop=stop))
    assert 0 < read <= 2 * jsonlines.READ_CHUNK_BYTES // len(ASSISTANT_LINE) + 1


def test_millions_of_messages_make_a_bounded_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """Running sums: entries are taken as read, never listed; the table of a run's messages
    stops growing at its bound (the messages already in it still update)."""
    monkeypatch.setattr(claude_tokens, "MAX_TRANSCRIPT_MESSAGES", 1000)
    monkeypatch.setattr(gemini, "MAX_CHAT_ANSWERS", 1000)
    stamp = "2026-12-01T05:48:02.020Z"

    def entries(count: int) -> Iterator[object]:
        for index in range(count):
            usage = {"input_tokens": 1, "output_tokens": 2}
            message = {"id": f"msg_{index}", "model": "claude-x", "usage": usage}
            yield {"type": "assistant", "message": message, "timestamp": stamp}

    found = transcript_messages(entries(100_000), (), "2026-12-01T05:00:00Z")
    assert len(found) == 1000
    answers = (
        {"id": f"a{index}", "timestamp": stamp, "tokens": {"input": 3, "output": 1}}
        for index in range(100_000)
    )
    models = gemini_chat_tokens(answers, "2026-12-01T05:00:00Z")
    assert models == {"gemini": (3000, 1000, 0, 0)}


# ----- under the daemon -----------------------------------------------------------------------


def claude_home(tmp_path: Path, repo: Path) -> tuple[Path, Path]:
    """A HOME holding the killed run's real transcript; and that transcript's path."""
    home = tmp_path / "home"
    shutil.copytree(FIXTURES / "claude-home", home)
    (found,) = (home / ".claude" / "projects").glob(f"*/{CLAUDE_SESSION}.jsonl")
    own = home / ".claude" / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(repo))
    own.mkdir()
    return home, found.rename(own / found.name)


def killed_claude(herd: Herd, tmp_path: Path, name: str = "cl") -> tuple[Path, Path]:
    """A Claude session whose first run is killed before its result and whose resume
    completes; returns the herd.toml's folder and the transcript herd will read."""
    repo = make_repo(tmp_path / "repo")
    home, transcript = claude_home(tmp_path, repo)
    command = replay(
        FIXTURES / "real/claude-killed-midrun.log", FIXTURES / "real/claude-resumed-under-herd.log"
    )
    herd.write(session(name, repo, "claude", command, env=f'{{ HOME = "{home}" }}'))
    return repo, transcript


def daemon_pid(herd: Herd) -> int:
    return int((herd.root / ".herd" / "daemon.lock").read_text())


def peak_rss_bytes(pid: int) -> int:
    """The process's high-water resident memory (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for {pid}")


def ls(herd: Herd, name: str) -> dict[str, object]:
    (status,) = [s for s in json.loads(herd.cli("ls", "--json").stdout) if s["session"] == name]
    return status


def check_daemon_survives(herd: Herd) -> None:
    """Up with a killed Claude run whose transcript is huge: the daemon stays small, the
    session restarts (its resume completes) and `herd down` ends the daemon (exit 0)."""
    up = herd.cli("up", "--no-tui")
    assert up.returncode == 0, up.stderr
    pid = daemon_pid(herd)
    try:
        wait_until(
            lambda: ls(herd, "cl")["state"] in ("completed", "failed"),
            timeout_s=90,
            what="the session to restart and complete",
        )
        status = ls(herd, "cl")
        assert status["state"] == "completed" and status["run"] == 2, status
        peak = peak_rss_bytes(pid)
    finally:
        down = herd.cli("down", timeout_s=90)
    assert down.returncode == 0, down.stdout + down.stderr
    print(f"daemon peak RSS {peak / MIB:.0f} MiB")  # the figure, in the pidns report (-rP)
    wait_until(lambda: pid_gone(pid))
    assert peak < DAEMON_MAX_RSS_BYTES, f"the daemon reached {peak / MIB:.0f} MiB"


@pytest.mark.pidns
@pytest.mark.timeout(180)
def test_a_transcript_line_of_400_mb_leaves_the_daemon_small(herd: Herd, tmp_path: Path) -> None:
    """The killed run's spend still comes from the lines before the huge one."""
    _, transcript = killed_claude(herd, tmp_path)
    huge_line(transcript, 400 * MIB, before=transcript.read_bytes())
    check_daemon_survives(herd)
    killed, _ = run_usages_offline(herd)
    assert killed["output_tokens"] == 90  # the transcript's figures, not stdout's 3


def run_usages_offline(herd: Herd) -> list[dict[str, object]]:
    """The runs' usage, as the store holds them once the daemon is down."""
    store = Store(herd.root / ".herd" / "state.db")
    try:
        return [r.usage or {} for r in store.runs("cl")]
    finally:
        store.close()


@pytest.mark.slow
@pytest.mark.pidns
@pytest.mark.timeout(600)
@pytest.mark.parametrize("kind", ["line-1.5GB", "line-4GB", "lines-2M"])
def test_huge_transcripts_leave_the_daemon_small(herd: Herd, tmp_path: Path, kind: str) -> None:
    _, transcript = killed_claude(herd, tmp_path)
    if kind == "lines-2M":
        short_lines(transcript, 2_000_000, distinct=True)
    else:
        size = 1_500_000_000 if kind == "line-1.5GB" else 4_000_000_000
        huge_line(transcript, size, before=transcript.read_bytes())
    check_daemon_survives(herd)


@pytest.mark.timeout(120)
def test_a_stop_never_waits_for_a_read_of_agent_files(herd: Herd, tmp_path: Path) -> None:
    """A transcript of two million short lines takes seconds to read: a stop that comes
    meanwhile cancels the read and answers at once."""
    _, transcript = killed_claude(herd, tmp_path)
    short_lines(transcript, 2_000_000)
    herd.start().call("start", name="cl")
    # The run was killed; its end waits for the read of the transcript.
    wait_until(
        lambda: (s := herd.status("cl"))["state"] == "running" and s["pid"] is None,
        timeout_s=30,
        what="the first run to end",
    )
    started = time.monotonic()
    stopped = herd.client.call("stop", name="cl", socket_timeout_s=None)
    took_s = time.monotonic() - started
    assert stopped["state"] == "stopped", stopped
    assert took_s < 3, f"the stop took {took_s:.1f} s"
    assert run_usages(herd, "cl", 1)
