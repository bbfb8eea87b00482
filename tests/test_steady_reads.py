"""A chatty agent's output is read a few lines at a time when no budget needs it at once: what
a person sees and the totals still arrive whole, in order (issue 14, steady-state CPU)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import FAST, Herd, script, wait_until

SESSION_ID = "3f6b2c1e-8a4d-4e2b-9c7f-1d2e3a4b5c6d"


def claude_line(index: int, text: str) -> str:
    message = {
        "id": f"msg_{index}",
        "content": [{"type": "text", "text": text}],
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    return json.dumps({"type": "assistant", "message": message, "session_id": SESSION_ID})


def chatty_agent(go: Path, burst: int) -> str:
    """Prints one message, waits for `go` to exist, then `burst` messages as fast as it can."""
    first, lines = claude_line(0, "first"), [claude_line(i, f"step {i}") for i in range(1, burst)]
    return script(f"""
        import os, time
        print({first!r}, flush=True)
        while not os.path.exists({str(go)!r}):
            time.sleep(0.01)
        for line in {lines!r}:
            print(line, flush=True)
        print({claude_line(burst, "last")!r}, flush=True)
        time.sleep(120)
    """)


def session(name: str, command: str, budget: str = "") -> str:
    line = f"budget = {{ {budget} }}\n" if budget else ""
    return (
        f'[[session]]\nname = "{name}"\nagent = "claude"\ncommand = {command}\n'
        f'restart = "never"\ncwd = "."\nstop_grace = "2s"\n{line}\n'
    )


def test_a_burst_read_in_batches_shows_its_last_line_and_every_message(tmp_path: Path) -> None:
    herd = Herd(tmp_path, FAST)
    go = tmp_path / "go"
    burst = 50
    herd.write(session("chatty", chatty_agent(go, burst)) + session("q", script("input()")))
    herd.start()
    try:
        herd.client.call("start", name="chatty")
        wait_until(lambda: herd.status("chatty")["last_line"] == "first", what="first line")
        go.touch()
        status = wait_until(
            lambda: (s := herd.status("chatty"))["last_line"] == "last" and s, what="last line"
        )
        assert status["usage"]["turns"] == burst + 1
        assert status["usage"]["input_tokens"] == 10 * (burst + 1)
    finally:
        herd.down()


def test_a_budget_limit_keeps_its_session_read_promptly(tmp_path: Path) -> None:
    herd = Herd(tmp_path, FAST)
    herd.write(
        session("free", script("input()")) + session("limited", script("input()"), "turns = 5")
    )
    herd.start()
    try:
        assert herd.daemon is not None
        sessions = herd.daemon.sessions
        assert sessions["limited"].follower.read_gap_s() == FAST.tail_min_gap_s
        assert sessions["free"].follower.read_gap_s() == FAST.tail_gap_s > FAST.tail_min_gap_s
    finally:
        herd.down()
