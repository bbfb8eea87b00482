"""herd.toml: every problem one line naming file, session and field; defaults merge; lookup."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_repo

from agentherd.sessions.config import (
    Budget,
    ConfigError,
    SessionConfig,
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
        "herd.toml: session \"b d\": on_drift.stalled: must be 'warn', 'notify', 'pause', "
        "'restart' or 'stop'",
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


def test_manages_takes_globs_of_names_and_check_warns_of_one_naming_nothing(
    tmp_path: Path,
) -> None:
    said = problems('[[session]]\nname = "a"\ncommand = ["true"]\nmanages = ["w/../x"]\n', tmp_path)
    assert said == [
        "herd.toml: session \"a\": manages: 'w/../x' is not a session name or a glob of names: "
        'use letters, digits, - and _, with * ? and [...], like "worker-*"'
    ]
    assert problems('[[session]]\nname = "a"\ncommand = ["true"]\nmanages = "w-*"\n', tmp_path)
    (tmp_path / "herd.toml").write_text(
        '[[session]]\nname = "boss"\ncommand = ["true"]\nmanages = ["worker-*", "wroker-*"]\n'
        '[[session]]\nname = "worker-1"\ncommand = ["true"]\n'
    )
    config = load_config(tmp_path / "herd.toml")
    assert config.sessions[0].manages == ["worker-*", "wroker-*"]
    assert [str(p) for p in environment_problems(config)] == [
        "warning: herd.toml: session \"boss\": manages: 'wroker-*' names no session in this "
        "file, so it grants nothing; fix the name or remove it"
    ]


SESSION = '[[session]]\nname = "a"\ncommand = ["true"]\n'
NUL = "contains a NUL character (\\u0000), which no program argument, environment variable or "
NUL += "path can hold; remove it"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('env = { X = "a\\u0000b" }', f'session "a": env.X: {NUL}'),
        ('env = { "X\\u0000" = "b" }', f'session "a": env: a key {NUL}'),
        (
            'env = { "X=Y" = "b" }',
            "session \"a\": env: 'X=Y' cannot be an environment variable name (empty, or holds "
            "'='); use letters, digits and _",
        ),
        (
            'env = { "" = "b" }',
            "session \"a\": env: '' cannot be an environment variable name (empty, or holds "
            "'='); use letters, digits and _",
        ),
        ('resume = ["x", "\\u0000"]', f'session "a": resume.1: {NUL}'),
        ('cwd = "w\\u0000x"', f'session "a": cwd: {NUL}'),
        ('plan = "p\\u0000"', f'session "a": plan: {NUL}'),
        ('progress = "p\\u0000"', f'session "a": progress: {NUL}'),
        ('verify = ["pytest", "-k\\u0000"]', f'session "a": verify.1: {NUL}'),
        ('verify_setup = "make\\u0000"', f'session "a": verify_setup: {NUL}'),
    ],
)
def test_nul_bytes_and_impossible_env_names_are_config_errors(
    line: str, expected: str, tmp_path: Path
) -> None:
    """Case 1(a): what exec or a path cannot hold never reaches `herd up` (and the pid-0 sweep)."""
    assert problems(SESSION + line + "\n", tmp_path) == [f"herd.toml: {expected}"]


def test_a_nul_in_the_command_names_the_element(tmp_path: Path) -> None:
    lines = problems('[[session]]\nname = "a"\ncommand = ["claude", "-p\\u0000"]\n', tmp_path)
    assert lines == [f'herd.toml: session "a": command.1: {NUL}']


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("restart_delay = nan", "restart_delay: nan is not a duration"),
        ("stop_grace = inf", "stop_grace: inf is not a duration"),
        ("crash_window = -inf", "crash_window: -inf is not a duration"),
        ("stop_grace = -1", "stop_grace: must not be negative"),
        ('verify_timeout = "400d"', "verify_timeout: must be at most 366d"),
        ("stable_after = 1e400", "stable_after: inf is not a duration"),
        ("restart_delay_max = 99999999999999999999999", "restart_delay_max: must be at most 366d"),
        ('stop_grace = "2h"', "stop_grace: must be at most 1h: `herd stop` and `herd down` wait"),
        ("budget = { stall = nan }", "budget.stall: nan is not a duration"),
        ("budget = { cost_usd = nan }", "budget.cost_usd: must be a finite number, not nan or inf"),
        ("budget = { cost_usd = inf }", "budget.cost_usd: must be a finite number, not nan or inf"),
        ("budget = { warn_at = nan }", "budget.warn_at: must be a fraction between 0 and 1"),
        ("budget = { tokens = 99999999999999999999 }", "budget.tokens: must be at most 92233"),
    ],
)
def test_nan_inf_negative_and_endless_durations_are_refused(
    line: str, message: str, tmp_path: Path
) -> None:
    """Case 5: `restart_delay = nan` killed the daemon at the first crash; `stop_grace = inf`
    made `herd stop` hang."""
    lines = problems(SESSION + line + "\n", tmp_path)
    assert len(lines) == 1 and lines[0].startswith(f'herd.toml: session "a": {message}'), lines


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -0.5, 10**400, "9999999d"])
def test_durations_must_be_finite_and_bounded(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(bad)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('autostart = "yes"', "autostart: must be true or false, without quotes"),
        ("max_crashes = true", "max_crashes: must be a whole number, without quotes"),
        ("max_crashes = 2.0", "max_crashes: must be a whole number, without quotes"),
        ('log_max_bytes = "1MB"', "log_max_bytes: must be a whole number, without quotes"),
        ("budget = { cost_usd = true }", "budget.cost_usd: must be a number, without quotes"),
        ("budget = { tokens = 1.5 }", "budget.tokens: must be a whole number, without quotes"),
        ("stop_signal = 15", "stop_signal: must be text in quotes"),
        ("cwd = 5", "cwd: must be a path in quotes"),
        ("env = { X = 1 }", "env.X: must be text in quotes"),
        ("env = []", "env: must be a table, like { key = value }"),
        ("budget = 5", "budget: must be a table, like { key = value }"),
        ("on_drift = 5", "on_drift: must be a table, like { key = value }"),
        ('scope = "src/**"', 'scope: must be a list, like ["a", "b"]'),
        ('scope = ["[z-a]"]', "scope: '[z-a]' is not a valid pattern"),
        ("resume = []", "resume: must not be empty"),
        ('plan = ""', "plan: must name a file"),
        ('cwd = "~nosuchuser-herd/x"', "cwd: '~nosuchuser-herd/x': no user 'nosuchuser-herd'"),
    ],
)
def test_wrong_types_are_errors_never_coerced(line: str, message: str, tmp_path: Path) -> None:
    """Case 13: `autostart = "yes"` was accepted silently; every field takes its own type only."""
    lines = problems(SESSION + line + "\n", tmp_path)
    assert len(lines) == 1 and lines[0].startswith(f'herd.toml: session "a": {message}'), lines


def test_a_wrong_command_type_is_one_line_about_the_element(tmp_path: Path) -> None:
    lines = problems('[[session]]\nname = "a"\ncommand = [1]\n', tmp_path)
    assert lines == ['herd.toml: session "a": command.0: must be text in quotes']
    lines = problems('[[session]]\nname = "a"\ncommand = 5\n', tmp_path)
    assert lines == [
        'herd.toml: session "a": command: must be an argv list like ["prog", "arg"], or a string '
        "run by sh -c"
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("session = [1]", "session: entry 1 is not a table; write each session as [[session]]"),
        ("session = 5", "session: write each session as [[session]]"),
        ("notify = []", "notify: must be an argv list with a program first"),
        ('notify = "x"', 'notify: must be a list, like ["a", "b"]'),
        ("notify_on = [1]", "notify_on.0: must be text in quotes"),
        ("fleet = 5", "fleet: must be a table, like { key = value }"),
        ('fleet = { budget = { wall_time = "x" } }', "fleet.budget.wall_time: 'x' is not a"),
        ("fleet = { budget = { cost_usd = nan } }", "fleet.budget.cost_usd: must be a finite"),
        ("keys = { restart = 5 }", "keys.restart: must be text in quotes"),
        ('keys = { restart = "" }', 'keys: restart = "" binds no key'),
        ("keys = []", "keys: must be a table, like { key = value }"),
        ('[defaults]\nautostart = "yes"', "defaults.autostart: must be true or false"),
        ("[defaults]\nstop_grace = nan", "defaults.stop_grace: nan is not a duration"),
        ("[defaults]\non_drift = 5", "defaults.on_drift: must be a table"),
        ('"a\\u0000" = 1', f"a key {NUL}"),
        ("x = " + "[" * 5000 + "]" * 5000, "not valid TOML for herd: arrays or tables nested"),
    ],
)
def test_every_section_refuses_wrong_types_with_one_line(
    text: str, expected: str, tmp_path: Path
) -> None:
    """Case 13: [fleet], [keys], [defaults], notify and the top level, beyond [[session]]."""
    lines = problems(text + "\n", tmp_path)
    assert len(lines) == 1 and lines[0].startswith(f"herd.toml: {expected}"), lines


def test_a_bad_default_is_reported_once_not_per_session(tmp_path: Path) -> None:
    lines = problems(
        '[defaults]\nautostart = "yes"\n' + SESSION + '[[session]]\nname = "b"\ncommand = ["x"]\n',
        tmp_path,
    )
    assert lines == ["herd.toml: defaults.autostart: must be true or false, without quotes"]


def test_a_folder_name_too_long_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "herd.toml").write_text(SESSION + f'cwd = "{"x" * 5000}"\n')
    found = environment_problems(load_config(tmp_path / "herd.toml"))
    assert len(found) == 1 and "File name too long; fix the path" in str(found[0])


ANY_VALUE = [
    *("true", "0", "-1", "1.5", "nan", "inf", "99999999999999999999", "1979-05-27"),
    *('"x"', '""', '"\\u0000"', '"~nosuchuser-herd/x"', '"-1"'),
    *("[]", "[1]", '[""]', "{}", "{ a = 1 }"),
]
"""A value of every TOML type, and the edge values that broke herd check (case 13)."""


def _every_field_with_every_value() -> list[str]:
    session = '[[session]]\nname = "a"\ncommand = ["true"]\n'
    texts = []
    for value in ANY_VALUE:
        for field in SessionConfig.model_fields:
            body = {"name": '"a"', "command": '["true"]', field: value}
            texts.append("[[session]]\n" + "".join(f"{k} = {v}\n" for k, v in body.items()))
            if field != "name":
                texts.append(f"[defaults]\n{field} = {value}\n" + session)
        for field in Budget.model_fields:
            texts.append(session + f"budget = {{ {field} = {value} }}\n")
            texts.append(f"[fleet]\nbudget = {{ {field} = {value} }}\n")
        keys = ("notify", "notify_on", "fleet", "keys", "defaults", "session")
        texts.extend(f"{key} = {value}\n" for key in keys)
        texts.append(f"[keys]\nrestart = {value}\n")
        texts.append(session + f"on_drift = {{ stalled = {value} }}\n")
        texts.append(session + f"env = {{ X = {value} }}\n")
    return texts


def test_no_value_in_any_field_is_an_internal_error(tmp_path: Path) -> None:
    """Case 13: every field of every section, given every type, is valid or one-line problems."""
    crashes = []
    for text in _every_field_with_every_value():
        (tmp_path / "herd.toml").write_text(text)
        try:
            environment_problems(load_config(tmp_path / "herd.toml"))
        except ConfigError as exc:
            assert exc.problems and all("\n" not in str(p) for p in exc.problems), text
        except Exception as exc:  # what `herd check` answered with exit 70
            crashes.append((text, f"{type(exc).__name__}: {exc}"))
    assert not crashes, crashes[:5]
