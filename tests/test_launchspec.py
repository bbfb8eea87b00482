"""A run's argv and environment, built without a process: placeholders, resume, variables."""

from __future__ import annotations

from pathlib import Path

from agentherd.sessions.config import parse_config
from agentherd.sessions.launchspec import fill, run_argv, run_environment


def session(tmp_path: Path, extra: str = ""):  # type: ignore[no-untyped-def]
    text = (
        '[[session]]\nname = "api"\ncommand = ["agent", "run {run}", "{plan}"]\n'
        'resume = ["agent", "--resume", "{session_id}", "{checkpoint}", "{rescue_ref}"]\n'
        'plan = "plan.json"\nprogress = "notes.txt"\nenv = { A = "1", HERD_RUN = "x" }\n' + extra
    )
    return parse_config(text, tmp_path / "herd.toml").sessions[0]


def test_placeholders_are_filled_per_element_never_split() -> None:
    assert fill(["a {x} b", "{x}{y}"], {"x": "1 2", "y": ";rm"}) == ["a 1 2 b", "1 2;rm"]


def test_resume_needs_a_session_id_and_falls_back_to_command(tmp_path: Path) -> None:
    config = session(tmp_path)
    extra = {"HERD_CHECKPOINT": "abc", "HERD_RESCUE_REF": "refs/herd/api/rescue/2"}
    assert run_argv(config, "resume", 3, "sid-1", extra) == (
        ["agent", "--resume", "sid-1", "abc", "refs/herd/api/rescue/2"],
        "resume",
    )
    assert run_argv(config, "resume", 3, None, extra) == (
        ["agent", "run 3", "plan.json"],
        "command",
    )
    assert run_argv(config, "command", 4, "sid-1", {})[1] == "command"


def test_no_reset_and_no_rescue_read_none_not_an_empty_word(tmp_path: Path) -> None:
    # After a rate limit the tree is neither rescued nor reset: the prompt must still read.
    argv, _ = run_argv(session(tmp_path), "resume", 2, "sid-1", {"HERD_LAST_EXIT": "exit 1"})
    assert argv == ["agent", "--resume", "sid-1", "none", "none"]
    env = run_environment({}, session(tmp_path), 2, 0, {})
    assert env["HERD_CHECKPOINT"] == env["HERD_RESCUE_REF"] == ""  # the variables stay empty


def test_the_environment_layers_daemon_session_then_herd(tmp_path: Path) -> None:
    env = run_environment(
        {"PATH": "/bin", "A": "0"}, session(tmp_path), 5, 2, {"HERD_LAST_EXIT": "exit 1"}
    )
    assert env["PATH"] == "/bin" and env["A"] == "1"
    assert (env["HERD_SESSION"], env["HERD_RUN"], env["HERD_RESTART_COUNT"]) == ("api", "5", "2")
    assert env["HERD_LAST_EXIT"] == "exit 1" and env["HERD_CHECKPOINT"] == ""
