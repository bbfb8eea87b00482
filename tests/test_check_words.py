"""`herd check` finds every mistake of a herd.toml in one run and says how to fix each; the
command line answers a usage mistake with one `herd:` line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Herd, script
from test_cli import run_herd

SESSION = '[[session]]\nname = "a"\ncommand = ["true"]\n'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            SESSION + "budget = { cost = 5 }\n",
            'herd.toml: session "a": budget.cost: unknown key; did you mean "cost_usd"?\n',
        ),
        (
            SESSION + 'on_drift = { stall = "pause" }\n',
            'herd.toml: session "a": on_drift.stall: did you mean "stalled"?',
        ),
        (
            SESSION + 'verify = ["no-such-program-herd", "-q"]\n',
            "herd.toml: session \"a\": verify: 'no-such-program-herd' is not on PATH; install it "
            "or give its full path\n",
        ),
        (
            'notify = ["notify-send", "{sesion}: {message}"]\n' + SESSION,
            'herd.toml: notify: {sesion} is not a placeholder; did you mean "{session}"?',
        ),
        (
            '[keys]\nstart_stopp = "S"\n' + SESSION,
            'herd.toml: keys.start_stopp: no such action; did you mean "start-stop"?',
        ),
        (
            SESSION + 'notify = ["notify-send", "{message}"]\n',
            'herd.toml: session "a": notify: belongs at the top of herd.toml, above the first '
            "[[session]] (every key after [[session]] is that session's); move it up\n",
        ),
    ],
)
def test_check_names_the_fix(tmp_path: Path, text: str, expected: str) -> None:
    """Seen trying eleven mistakes: a suggestion from another table ("host" for budget.cost),
    none for on_drift.stall, a missing verify program, a misspelt notify placeholder and a
    [keys] action name that were never checked, and `notify` written under a session."""
    (tmp_path / "herd.toml").write_text(text)
    result = run_herd(tmp_path, "check")
    assert result.returncode == 2, result.stdout
    assert result.stderr.startswith(expected), result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr


def test_check_reports_every_problem_in_one_run(tmp_path: Path) -> None:
    """A wrong key in one session and a missing program in another: both at once, not the
    second only after the first is fixed."""
    (tmp_path / "herd.toml").write_text(
        SESSION
        + "budget = { cost = 5 }\n"
        + '[[session]]\nname = "b"\ncommand = ["no-such-program-herd"]\n'
    )
    result = run_herd(tmp_path, "check")
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert any('"a": budget.cost' in line for line in lines), lines
    assert any('"b": command' in line for line in lines), lines


def test_a_usage_mistake_is_one_herd_line_and_exit_2(tmp_path: Path) -> None:
    """The reference promises one `herd:` line for a person's mistake; Click printed three
    (usage, a hint, the error) with a blank line between."""
    result = run_herd(tmp_path, "events", "--nope")
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("herd: events: no such option '--nope'"), result.stderr
    assert "herd events --help" in result.stderr


def test_events_n_prints_the_last_n(herd: Herd) -> None:
    """`herd events -n 2`, as `tail -n` and `herd logs -n`: the newest two events, in order."""
    herd.write(f"""
        [[session]]
        name = "api"
        command = {script('print("ok")')}
    """)
    herd.start().call("start", name="api")
    herd.wait_state("api", "completed")
    every = [json.loads(x) for x in herd.cli("events", "--json").stdout.splitlines()]
    result = herd.cli("events", "--json", "-n", "2")
    assert result.returncode == 0, result.stderr
    last = [json.loads(x) for x in result.stdout.splitlines()]
    assert [e["seq"] for e in last] == [e["seq"] for e in every[-2:]]


def test_demo_keep_after_Q_says_the_fleet_was_stopped(tmp_path: Path) -> None:
    """Seen in `herd demo --keep`: after `Q` (stop all) herd said the fleet keeps running."""
    from agentherd.tui.cli.daemonverbs import demo_farewell

    where = f"herd -c {tmp_path}/herd.toml"
    stopped = "\n".join(demo_farewell(tmp_path, where, keep=True, running=False))
    assert stopped.startswith("demo fleet stopped") and "keeps running" not in stopped
    kept = "\n".join(demo_farewell(tmp_path, where, keep=True, running=True))
    assert kept.startswith("the demo fleet keeps running") and f"`{where} down`" in kept
