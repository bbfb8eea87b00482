"""Reviewing a finished fleet with no daemon: status, ls, logs, events and report read `.herd/`."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

from conftest import HERD, SIMAGENT, Herd, script, sim_repo

from agentherd.supervisor.api.client import Client


def claude_lines() -> str:
    """A TOML argv printing three Claude stream-json events and an unterminated last line."""
    events = [
        {"type": "system", "subtype": "init", "session_id": "s-1", "model": "m"},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "Hello there"}]}},
        {"type": "result", "subtype": "success", "result": "All done", "session_id": "s-1"},
    ]
    body = "".join(json.dumps(e) + "\n" for e in events)
    return script(f"import sys; sys.stdout.write({body!r} + 'tail without newline')")


def finished_fleet(herd: Herd) -> None:
    """A fleet with one completed claude-style session and one sim agent, then `herd down`."""
    sim_repo(herd.root / "repo", features=2)
    herd.write(f"""
        [[session]]
        name = "talker"
        agent = "claude"
        command = {claude_lines()}
        restart = "never"

        [[session]]
        name = "sim"
        cwd = "repo"
        command = {json.dumps([*SIMAGENT, "--delay", "0"])}
        plan = "feature_list.json"
        progress = "claude-progress.txt"
        restart = "never"
    """)
    client = herd.start()
    client.call("start", name="talker")
    client.call("start", name="sim")
    herd.wait_state("talker", "completed", "failed")
    herd.wait_state("sim", "completed", "failed", "stopped")
    herd.down()
    assert not Client(herd.root / "none.sock").ping()


def on_terminal(herd: Herd, *args: str) -> bytes:
    """What `herd ARGS` writes to a terminal."""
    primary, secondary = pty.openpty()
    try:
        subprocess.run(
            [HERD, *args],
            cwd=herd.root,
            stdout=secondary,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            timeout=30,
            check=True,
        )
        os.close(secondary)
        chunks = []
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(primary)


def test_status_ls_events_and_report_read_the_state_on_disk_without_a_daemon(herd: Herd) -> None:
    finished_fleet(herd)
    state_files = {p: p.stat().st_mtime_ns for p in (herd.root / ".herd").rglob("*") if p.is_file()}

    listed = herd.cli("ls", "--json")
    assert listed.returncode == 0, listed.stderr
    assert "no daemon is running" in listed.stderr
    by_name = {s["session"]: s for s in json.loads(listed.stdout)}
    assert by_name["talker"]["state"] == "completed"
    assert by_name["sim"]["plan"]["total"] == 2

    one = herd.cli("status", "sim")
    assert one.returncode == 0 and one.stdout.startswith("sim  "), one.stderr

    events = herd.cli("events", "--session", "talker")
    assert events.returncode == 0 and "run-exited" in events.stdout, events.stderr

    report = herd.cli("report", "sim")
    assert report.returncode == 0 and "sim" in report.stdout, report.stderr

    refused = herd.cli("start", "sim")
    assert refused.returncode == 2 and "no herd daemon is running" in refused.stderr
    assert not Client(herd.daemon.socket_path).ping(), "reading never starts a daemon"  # type: ignore[union-attr]
    after = {p: p.stat().st_mtime_ns for p in (herd.root / ".herd").rglob("*") if p.is_file()}
    assert {p: after.get(p) for p in state_files} == state_files, "reading wrote nothing"


def test_logs_without_a_daemon_are_readable_on_a_terminal_with_tail_and_a_final_newline(
    herd: Herd,
) -> None:
    finished_fleet(herd)
    raw = herd.cli("logs", "talker")
    assert raw.returncode == 0, raw.stderr
    assert raw.stdout.startswith('{"type": "system"') and raw.stdout.endswith(
        "tail without newline"
    )

    shown = on_terminal(herd, "logs", "talker").decode()
    assert '{"type"' not in shown, "stream-json is summarised on a terminal"
    assert "Hello there" in shown and "result: All done" in shown
    assert shown.endswith("tail without newline\r\n"), "the prompt does not glue to the last line"

    last_two = on_terminal(herd, "logs", "talker", "-n", "2").decode().splitlines()
    assert last_two == ["result: All done", "tail without newline"]

    as_bytes = on_terminal(herd, "logs", "talker", "--raw", "--tail", "1").decode()
    assert as_bytes == "tail without newline\r\n"


def test_tail_offset_finds_the_last_lines(tmp_path: Path) -> None:
    from agentherd.tui.cli.follow import tail_offset

    path = tmp_path / "log"
    path.write_bytes(b"a\nb\nc\n")
    assert path.read_bytes()[tail_offset(path, 2) :] == b"b\nc\n"
    assert path.read_bytes()[tail_offset(path, 9) :] == b"a\nb\nc\n"
    assert path.read_bytes()[tail_offset(path, 0) :] == b""
    path.write_bytes(b"a\nb\nc")
    assert path.read_bytes()[tail_offset(path, 1) :] == b"c"


def test_status_of_a_past_task_logs_of_a_run_and_json_forms_read_from_disk(herd: Herd) -> None:
    """A session run as two tasks, then `herd down`: `status talker/1` is the first task
    (completed, its own run), `status talker/4` names no task (exit 2, one line saying what
    to run), `logs --run 1` is the first run's output, and `events --json`, `report --json`
    and `status --json` are the daemon's JSON forms; nothing starts a daemon."""
    finished_fleet(herd)
    herd.start().call("start", name="talker")
    herd.wait_state("talker", "completed", "failed")
    herd.down()
    assert herd.daemon is not None and not Client(herd.daemon.socket_path).ping()

    first = herd.cli("status", "talker/1", "--json")
    assert first.returncode == 0, first.stderr
    task = json.loads(first.stdout)
    assert (task["handle"], task["state"], task["run"]) == ("talker/1", "completed", 1)
    assert "usage" not in task, "a past task, not the session's current status"

    current = json.loads(herd.cli("status", "talker/2", "--json").stdout)
    assert (current["handle"], current["run"], current["session"]) == ("talker/2", 2, "talker")
    assert herd.cli("status", "talker").stdout.startswith("talker  ")

    missing = herd.cli("status", "talker/4")
    assert missing.returncode == 2 and "no task 'talker/4'" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) <= 2, missing.stderr

    run_one = herd.cli("logs", "talker", "--run", "1")
    assert run_one.returncode == 0 and run_one.stdout.endswith("tail without newline")

    events = [json.loads(line) for line in herd.cli("events", "--json").stdout.splitlines()]
    assert {"seq", "at", "session", "run", "kind", "message", "data"} <= set(events[0])
    assert [
        e["run"] for e in events if e["kind"] == "run-started" and e["session"] == "talker"
    ] == [
        1,
        2,
    ]
    report = json.loads(herd.cli("report", "talker", "--json").stdout)
    assert report["session"] == "talker"
    assert not Client(herd.daemon.socket_path).ping(), "reading never starts a daemon"
