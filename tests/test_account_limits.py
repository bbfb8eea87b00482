"""One account, one limit: sessions sharing a provider account park together and resume
staggered after the reset (the fleet-wide rate-limit scheduler)."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from pathlib import Path

from conftest import FAST, SIMAGENT, Herd, sim_repo, wait_until

from agentherd.sessions.accounts import account_of
from agentherd.sessions.config import SessionConfig
from agentherd.sessions.status import SessionStatus
from agentherd.sessions.times import parse_iso
from agentherd.tui.dashboard.rows import fleet_summary

NAMES = ("a", "b", "c")
RESET_S = 2
STAGGER_S = 1.5


def _session(name: str, repo: Path, gate: Path, extra: list[str]) -> str:
    argv = [*SIMAGENT, "--delay", "0", "--wait-at", f"1:{gate}", *extra]
    lines = [
        "[[session]]",
        f"name = {json.dumps(name)}",
        f"cwd = {json.dumps(str(repo))}",
        'agent = "claude"',
        f"command = {json.dumps(argv)}",
        f"resume = {json.dumps([*argv, '--resume', '{session_id}'])}",
        'restart_delay = "0s"',
        "autostart = false",
        'env = { ANTHROPIC_API_KEY = "sk-team" }',  # one key: one account for all three
    ]
    return "\n".join(lines) + "\n"


def test_three_sessions_of_one_account_park_together_and_resume_staggered_in_order(
    herd: Herd, tmp_path: Path
) -> None:
    gates = {name: tmp_path / f"go-{name}" for name in NAMES}
    toml = ""
    for name in NAMES:
        repo = sim_repo(tmp_path / name, features=1)
        limit = ["--limit-at", f"1:{RESET_S}"] if name == "a" else []
        toml += _session(name, repo, gates[name], limit)
    crash = ["--crash-at", "1", "--crash-once"]
    toml += _session("d", sim_repo(tmp_path / "d", features=1), tmp_path / "go-d", crash)
    (tmp_path / "go-d").touch()
    herd.timings = dataclasses.replace(
        FAST, rate_limit_wait_s=3600.0, rate_limit_stagger_s=STAGGER_S
    )
    herd.write(toml)
    herd.start()
    for name in NAMES:
        herd.client.call("start", name=name)
    for name in NAMES:  # running, and its conversation's id known (the resume needs it)
        wait_until(lambda n=name: herd.status(n)["agent_session_id"], what=f"{name}'s id")
    gates["a"].touch()  # a reaches feature 1 and hits the account's limit
    parked = {name: herd.wait_state(name, "backoff", "failed", "completed") for name in NAMES}
    for name, status in parked.items():
        assert (status["state"], status["reason"]) == ("backoff", "rate-limit"), (
            name,
            status,
            herd.events(name),
        )
        assert status["limit"]["account"] == "claude:ANTHROPIC_API_KEY"
        assert status["limit"]["delay_source"] == "agent"
    resumes = [parse_iso(parked[name]["next_restart_at"]) for name in NAMES]
    assert all(resumes)
    # The same reset for all, and one stagger step apart in the order they were parked.
    steps = [
        (later - earlier).total_seconds()
        for earlier, later in zip(resumes, resumes[1:], strict=False)
    ]  # type: ignore[operator]
    assert steps == [STAGGER_S, STAGGER_S], resumes
    limits = herd.status("a")["fleet"]["limits"]["claude:ANTHROPIC_API_KEY"]
    assert [p["session"] for p in limits["parked"]] == list(NAMES)
    shown = [SessionStatus.model_validate(herd.status(name)) for name in NAMES]
    assert "limit claude:ANTHROPIC_API_KEY: 3 parked until " in fleet_summary(shown)
    for name in ("b", "c"):
        (limited,) = herd.events(name, "rate-limited")
        assert "another session of account claude:ANTHROPIC_API_KEY" in limited["message"]
        assert not herd.events(name, "worktree-reset")  # parked, not crashed
    # A session of the account that crashes during the park restarts in line, after c.
    herd.client.call("start", name="d")
    crashed = herd.wait_state("d", "backoff", "failed", "completed")
    assert crashed["reason"] == "crashed", herd.events("d")
    waits = wait_until(lambda: herd.events("d", "rate-limited"), what="d to wait its turn")
    assert parse_iso(waits[0]["data"]["resumes_at"]) == resumes[-1] + timedelta(seconds=STAGGER_S)
    for gate in gates.values():
        gate.touch()
    for name in NAMES:
        status = herd.wait_state(name, "completed", "failed", timeout_s=30)
        assert status["state"] == "completed", herd.events(name)
    started = {name: parse_iso(herd.events(name, "run-started")[-1]["at"]) for name in NAMES}
    for name, resume in zip(NAMES, resumes, strict=True):
        assert started[name] >= resume, (name, started, resumes)  # type: ignore[operator]
        modes = [e["data"]["mode"] for e in herd.events(name, "run-started")]
        assert modes == ["command", "resume"], (name, herd.events(name))
    order = sorted(NAMES, key=lambda name: started[name])  # type: ignore[arg-type,return-value]
    assert order == list(NAMES)
    status_d = herd.wait_state("d", "completed", "failed", timeout_s=30)
    assert status_d["state"] == "completed", herd.events("d")
    restarted_d = parse_iso(herd.events("d", "run-started")[-1]["at"])
    assert restarted_d is not None and restarted_d >= resumes[-1] + timedelta(seconds=STAGGER_S)


def test_an_account_defaults_to_the_agent_and_where_its_key_comes_from() -> None:
    claude = SessionConfig(name="s", command="x", agent="claude")
    assert account_of(claude, {}) == "claude:login"
    assert account_of(claude, {"ANTHROPIC_API_KEY": "k"}) == "claude:ANTHROPIC_API_KEY"
    keyed = claude.model_copy(update={"env": {"ANTHROPIC_API_KEY": "k"}})
    assert account_of(keyed, {}) == "claude:ANTHROPIC_API_KEY"
    gemini = SessionConfig(name="s", command="x", agent="gemini")
    assert account_of(gemini, {"GEMINI_API_KEY": "k"}) == "gemini:GEMINI_API_KEY"
    named = claude.model_copy(update={"account": "team-b"})
    assert account_of(named, {"ANTHROPIC_API_KEY": "k"}) == "team-b"


def test_herd_check_refuses_an_account_it_cannot_show_in_one_line(herd: Herd) -> None:
    herd.write('[[session]]\nname = "a"\ncommand = "true"\naccount = "team key!"\n')
    checked = herd.cli("check")
    assert checked.returncode == 2, checked
    (line,) = checked.stderr.strip().splitlines()
    assert 'session "a": account: must be 1-64 letters' in line, line
    assert "herd.toml" in line
