"""The session verbs answered without click or pydantic (tui/cli/fastverbs.py) print, and exit
with, exactly what the full command line does; a request that got no answer is never resent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import sleeping_fleet

from agentherd.sessions.states import State
from agentherd.tui.cli import common, fastcall, fastverbs, sessionverbs

HERD = [sys.executable, "-c", "from agentherd.tui.cli.fastpath import main; main()"]
INSTALLED = str(Path(sys.executable).parent / "herd")
FULL = [sys.executable, "-c", "from agentherd.tui.cli.cli import main; main()"]


def test_the_fast_verbs_repeat_the_full_command_lines_constants() -> None:
    assert (fastverbs.EXIT_PERSON, fastverbs.EXIT_INTERNAL, fastverbs.EXIT_FORBIDDEN) == (
        common.EXIT_PERSON,
        common.EXIT_INTERNAL,
        common.EXIT_FORBIDDEN,
    )
    assert fastverbs.TASK_ENDED == sessionverbs.TASK_ENDED
    assert {state.value for state in State} == fastverbs.KNOWN_STATES


def test_only_the_plain_forms_are_taken() -> None:
    assert fastverbs.parse(["stop", "api", "--no-wait"]) == (
        None,
        "stop",
        {"name": "api", "kill": False, "no_wait": True},
    )
    assert fastverbs.parse(["-c", "h.toml", "ack", "api", "stall"]) == (
        "h.toml",
        "ack",
        {"name": "api", "kind": "stall"},
    )
    assert fastverbs.parse(["wait", "api/2", "--until", "running,idle"]) == (
        None,
        "wait",
        {"target": "api/2", "timeout_s": None, "until": ["running", "idle"]},
    )
    assert fastverbs.parse(["send", "api", "go on", "--timeout", "2", "--wait"]) == (
        None,
        "send",
        {"name": "api", "text": "go on", "wait": True, "timeout_s": 2.0},
    )
    for argv in (
        ["start", "api", "--json"],
        ["restart", "api", "--from", "last"],
        ["send", "api", "-"],  # standard input: read once, by whichever path answers
        ["send", "api", "hi", "--wait", "--wait"],
        ["stop", "api", "--help"],
        ["approve"],
        ["pause", "a", "b"],
        ["wait", "api", "--until", "runing"],  # the full command line names every state
        ["wait", "api", "--timeout", "soon"],
        ["wait", "--timeout", "1"],
        ["send", "api"],
    ):
        assert fastverbs.parse(argv) is None, argv


def test_a_request_without_an_answer_is_an_error_and_never_sent_again(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sent: list[str] = []

    def went_away(socket_path: str, op: str, **args: object) -> object:
        sent.append(op)
        raise fastcall.NoAnswer("the daemon went away during `stop`")

    monkeypatch.setattr(fastverbs, "local_socket", lambda config: "/nowhere.sock")
    monkeypatch.setattr(fastverbs, "call", went_away)
    with pytest.raises(SystemExit) as exited:
        fastverbs.fast_verb(["stop", "api"])
    assert exited.value.code == fastverbs.EXIT_INTERNAL and sent == ["stop"]
    assert "went away during `stop`" in capsys.readouterr().err


def test_each_verb_prints_and_exits_as_the_full_command_line(tmp_path: Path) -> None:
    """The same steps on two alike sessions, one through each path."""
    sleeping_fleet(tmp_path, "fast", "full")
    run = lambda argv: subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True)  # noqa: E731
    steps = [
        ["start", "{}"],
        ["pause", "{}"],
        ["resume", "{}"],
        ["ack", "{}"],
        ["ack", "{}", "stall"],
        ["approve", "{}"],  # no plan change waits: the daemon's error, exit 2
        ["reject", "{}"],
        ["wait", "{}", "--timeout", "0.2"],  # still running: exit 124
        ["wait", "{}", "--until", "running"],
        ["stop", "{}"],
        ["wait", "{}"],  # the task ended stopped: exit 3
        ["wait", "{}", "--until", "running", "--timeout", "5"],  # it will not be: exit 4
        ["kill", "{}", "--no-wait"],
        ["start", "{}", "--now"],
        ["restart", "{}"],
        ["send", "{}", "go on"],  # a command without a `{message}` resume: the daemon says so
        ["kill", "{}"],
    ]
    assert run([*FULL, "up", "--no-tui"]).returncode == 0
    try:
        for step in steps:
            fast = run([*HERD, *[word.format("fast") for word in step]])
            full = run([*FULL, *[word.format("full") for word in step]])
            said = (full.returncode, full.stdout, full.stderr)
            assert (fast.returncode, fast.stdout, fast.stderr.replace("fast", "full")) == (
                said[0],
                said[1].replace("full", "fast"),
                said[2],
            ), step
        missing = run([*HERD, "stop", "nope"])
        assert (missing.returncode, missing.stderr) == (2, run([*FULL, "stop", "nope"]).stderr)
        # The installed command takes the fast path: no click, no pydantic.
        timed = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
        started = subprocess.run(
            [INSTALLED, "start", "fast"], cwd=tmp_path, capture_output=True, text=True, env=timed
        )
        assert started.returncode == 0 and started.stdout.startswith("fast/"), started.stderr
        imported = {
            line.rpartition("|")[2].strip()
            for line in started.stderr.splitlines()
            if line.startswith("import time:")
        }
        assert "agentherd.tui.cli.fastverbs" in imported
        assert not imported & {"click", "pydantic"}
    finally:
        assert run([*FULL, "down"]).returncode == 0
