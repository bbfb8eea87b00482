"""herd.toml: every problem one line naming file, session and field; defaults merge; lookup."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_repo

from agentherd.sessions.config import (
    ConfigError,
    environment_problems,
    find_config,
    load_config,
    parse_config,
)
from agentherd.sessions.durations import parse_duration


def problems(text: str, tmp_path: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, tmp_path / "herd.toml")
    return [str(p) for p in caught.value.problems]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("20m", 1200),
        ("6h", 21600),
        ("1h30m", 5400),
        (45, 45),
        ("2.5", 2.5),
        ("0.2s", 0.2),
        ("250ms", 0.25),
    ],
)
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["abc", "5 parsecs", "", "-3", True, "1h 30x"])
def test_bad_durations_say_how_to_write_one(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_a_negative_budget_names_file_session_and_field(tmp_path: Path) -> None:
    lines = problems(
        '[[session]]\nname = "api"\ncommand = ["x"]\nbudget = { cost_usd = -1 }\n', tmp_path
    )
    assert lines == ['herd.toml: session "api": budget.cost_usd: must be a positive number']


def test_unknown_keys_are_errors_with_a_suggestion(tmp_path: Path) -> None:
    lines = problems(
        'colour = 1\n[[session]]\nname = "api"\ncommand = ["x"]\nrestrat = "always"\n', tmp_path
    )
    assert 'herd.toml: session "api": restrat: unknown key; did you mean "restart"?' in lines
    assert any(line.startswith("herd.toml: colour: unknown key") for line in lines)


def test_every_problem_is_reported_once(tmp_path: Path) -> None:
    lines = problems(
        '[[session]]\nname = "b d"\ncommand = []\nstop_grace = "abc"\n'
        'on_drift = { stalled = "explode" }\nrestart = "sometimes"\n'
        '[[session]]\nname = "ok"\n',
        tmp_path,
    )
    assert lines == [
        'herd.toml: session "b d": name: use 1-64 letters, digits, - and _',
        'herd.toml: session "b d": command: must not be empty; give an argv list like '
        '["claude", "-p", "..."]',
        "herd.toml: session \"b d\": restart: must be 'never', 'on-failure', 'always' or "
        "'until-done'",
        "herd.toml: session \"b d\": stop_grace: 'abc' is not a duration; write it like 90s, "
        "20m, 6h, 1h30m or a number of seconds",
        "herd.toml: session \"b d\": on_drift.stalled: must be 'warn', 'notify' or 'pause'",
        'herd.toml: session "ok": command: required; add it',
    ]


def test_not_toml_is_one_line(tmp_path: Path) -> None:
    lines = problems("[[session]\nname=", tmp_path)
    assert len(lines) == 1 and lines[0].startswith("herd.toml: not valid TOML:")


def test_until_done_needs_a_plan(tmp_path: Path) -> None:
    lines = problems('[[session]]\nname = "a"\ncommand = ["x"]\nrestart = "until-done"\n', tmp_path)
    assert lines == [
        'herd.toml: session "a": restart = "until-done" needs a plan file; add '
        'plan = "feature_list.json"'
    ]


def test_duplicate_names_are_an_error(tmp_path: Path) -> None:
    lines = problems(
        '[[session]]\nname = "a"\ncommand = ["x"]\n[[session]]\nname = "a"\ncommand = ["y"]\n',
        tmp_path,
    )
    assert lines == ['herd.toml: session "a": name: another session has this name']


def test_defaults_merge_key_by_key_including_budget(tmp_path: Path) -> None:
    config = parse_config(
        '[defaults]\nrestart = "always"\nbudget = { wall_time = "6h", cost_usd = 25 }\n'
        'on_drift = { stalled = "notify" }\n'
        '[[session]]\nname = "a"\ncommand = "make agent"\nbudget = { tokens = 100 }\n'
        'on_drift = { plan-tampered = "pause" }\ncwd = "sub"\n'
        '[[session]]\nname = "b"\ncommand = ["x"]\nrestart = "never"\n',
        tmp_path / "herd.toml",
    )
    a, b = config.sessions
    assert a.restart == "always" and b.restart == "never"
    assert a.budget.wall_time == 6 * 3600 and a.budget.cost_usd == 25 and a.budget.tokens == 100
    assert a.on_drift == {"stalled": "notify", "plan-tampered": "pause"}
    assert a.cwd == (tmp_path / "sub").resolve()
    assert a.argv(a.command) == ["/bin/sh", "-c", "make agent"]
    assert config.state_dir == tmp_path / ".herd"


def test_lookup_walks_upward_and_honours_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "herd.toml").write_text("")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    monkeypatch.delenv("HERD_CONFIG", raising=False)
    assert find_config(start=deep) == tmp_path / "herd.toml"
    other = tmp_path / "other.toml"
    other.write_text("")
    monkeypatch.setenv("HERD_CONFIG", str(other))
    assert find_config(start=deep) == other.resolve()
    with pytest.raises(ConfigError, match="no such file"):
        find_config(tmp_path / "missing.toml")


def test_missing_config_says_to_run_init(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HERD_CONFIG", raising=False)
    with pytest.raises(ConfigError, match="run `herd init`"):
        find_config(start=tmp_path)


def test_environment_problems_missing_cwd_and_program(tmp_path: Path) -> None:
    (tmp_path / "herd.toml").write_text(
        '[[session]]\nname = "a"\ncommand = ["no-such-program-xyz"]\n'
        '[[session]]\nname = "b"\ncommand = ["x"]\ncwd = "missing"\n'
    )
    lines = [str(p) for p in environment_problems(load_config(tmp_path / "herd.toml"))]
    assert lines == [
        "herd.toml: session \"a\": command: 'no-such-program-xyz' is not on PATH; install it or "
        "give its full path",
        f'herd.toml: session "b": cwd: {tmp_path / "missing"} does not exist; create it or fix '
        "the path",
    ]


def test_two_sessions_in_one_worktree_get_a_warning(tmp_path: Path) -> None:
    make_repo(tmp_path / "repo")
    (tmp_path / "repo" / "sub").mkdir()
    (tmp_path / "herd.toml").write_text(
        '[[session]]\nname = "a"\ncommand = ["true"]\ncwd = "repo"\n'
        '[[session]]\nname = "b"\ncommand = ["true"]\ncwd = "repo/sub"\n'
    )
    found = environment_problems(load_config(tmp_path / "herd.toml"))
    assert len(found) == 1 and found[0].warning
    assert str(found[0]).startswith(
        'warning: herd.toml: session "b": cwd: shares the git '
        f'worktree {tmp_path / "repo"} with session "a"'
    )
