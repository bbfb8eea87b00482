"""The real `herd` command against a real daemon: verbs, JSON, exit codes, one-line errors."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import HERD, PY, Herd, script, wait_until

SLEEPER = script("""
    import time
    print("working", flush=True)
    time.sleep(60)
""")


def run_herd(cwd: Path, *args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HERD, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        stdin=subprocess.DEVNULL,
    )


def test_init_writes_a_config_that_checks_and_refuses_to_overwrite(tmp_path: Path) -> None:
    first = run_herd(tmp_path, "init")
    assert first.returncode == 0, first.stderr
    text = (tmp_path / "herd.toml").read_text()
    assert "[[session]]" in text and "# " in text
    again = run_herd(tmp_path, "init")
    assert again.returncode == 2 and "already exists" in again.stderr
    block = run_herd(tmp_path, "init", "--agent", "codex")
    assert block.returncode == 0 and '"codex"' in block.stdout
    assert (tmp_path / "herd.toml").read_text() == text


def test_check_prints_one_line_per_problem_and_exits_2(tmp_path: Path) -> None:
    (tmp_path / "herd.toml").write_text(
        '[[session]]\nname = "api"\ncommand = ["x"]\nbudget = { cost_usd = -1 }\n'
    )
    result = run_herd(tmp_path, "check")
    assert result.returncode == 2
    assert result.stderr == 'herd.toml: session "api": budget.cost_usd: must be a positive number\n'
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'cwd = "w\\u0000x"',
            'herd.toml: session "a": cwd: contains a NUL character (\\u0000), which no program '
            "argument, environment variable or path can hold; remove it\n",
        ),
        (
            'cwd = "~nosuchuser-herd/x"',
            "herd.toml: session \"a\": cwd: '~nosuchuser-herd/x': no user 'nosuchuser-herd' to "
            "expand ~ for; write the full path\n",
        ),
        (
            'env = { X = "a\\u0000b" }',
            'herd.toml: session "a": env.X: contains a NUL character (\\u0000), which no program '
            "argument, environment variable or path can hold; remove it\n",
        ),
        (
            'env = { "X=Y" = "b" }',
            "herd.toml: session \"a\": env: 'X=Y' cannot be an environment variable name (empty, "
            "or holds '='); use letters, digits and _\n",
        ),
        (
            'autostart = "yes"',
            'herd.toml: session "a": autostart: must be true or false, without quotes\n',
        ),
        (
            "restart_delay = nan",
            'herd.toml: session "a": restart_delay: nan is not a duration; write it like 90s, '
            "20m, 6h or 1h30m\n",
        ),
        (
            'rate_limit_wait = "0s"',
            'herd.toml: session "a": rate_limit_wait: must be a positive duration (a zero wait '
            'retries at once); write it like "60s"\n',
        ),
        (
            'rate_limit_wait = "10m"\nrate_limit_wait_max = "1m"',
            'herd.toml: session "a": rate_limit_wait_max is shorter than rate_limit_wait; make '
            "it at least as long, or remove it\n",
        ),
        (
            "stop_grace = inf",
            'herd.toml: session "a": stop_grace: inf is not a duration; write it like 90s, 20m, '
            "6h or 1h30m\n",
        ),
    ],
)
def test_check_answers_hostile_values_with_one_line_and_exit_2(
    tmp_path: Path, text: str, expected: str
) -> None:
    """Cases 1(a), 5 and 13: each was exit 0 (accepted) or exit 70 (internal error) before."""
    (tmp_path / "herd.toml").write_text(f'[[session]]\nname = "a"\ncommand = ["true"]\n{text}\n')
    result = run_herd(tmp_path, "check")
    assert (result.returncode, result.stderr) == (2, expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "session = [1, 2]",
            "herd.toml: session: entry 1 is not a table; write each session as [[session]]\n"
            "herd.toml: session: entry 2 is not a table; write each session as [[session]]\n",
        ),
        (
            "x = " + "[" * 5000 + "]" * 5000,
            "herd.toml: not valid TOML for herd: arrays or tables nested too deep\n",
        ),
    ],
)
def test_check_answers_a_malformed_file_with_exit_2(
    tmp_path: Path, text: str, expected: str
) -> None:
    """Case 13: a list of numbers for sessions, and nesting that makes tomllib recurse too deep."""
    (tmp_path / "herd.toml").write_text(text + "\n")
    result = run_herd(tmp_path, "check")
    assert (result.returncode, result.stderr) == (2, expected)


def test_check_refuses_a_turns_budget_for_an_agent_whose_turns_herd_cannot_count(
    tmp_path: Path,
) -> None:
    """Codex prints one turn per run, whatever its model answered: `turns = 3` never acted."""
    block = (
        '[[session]]\nname = "a"\nagent = "{agent}"\ncommand = ["true"]\nbudget = {{ turns = 3 }}\n'
    )
    (tmp_path / "herd.toml").write_text(block.format(agent="codex"))
    result = run_herd(tmp_path, "check")
    assert (result.returncode, result.stderr) == (
        2,
        'herd.toml: session "a": budget.turns: herd cannot count codex\'s turns (it prints one '
        "per run, not one per model answer); limit tokens or cost_usd instead, or remove it\n",
    )
    for agent in ("claude", "gemini", "opencode"):  # their turns are counted
        (tmp_path / "herd.toml").write_text(block.format(agent=agent))
        good = run_herd(tmp_path, "check")
        assert good.returncode == 0, (agent, good.stderr)
    fleet = '[fleet]\nbudget = { turns = 30 }\n[[session]]\nname = "a"\nagent = "codex"\n'
    (tmp_path / "herd.toml").write_text(fleet + 'command = ["true"]\n')
    warned = run_herd(tmp_path, "check")
    assert "fleet.budget.turns: the fleet's turns count one a run for a" in warned.stderr


def test_init_with_an_unknown_agent_is_a_person_error(tmp_path: Path) -> None:
    """Case 13: with a herd.toml present, `herd init --agent foo` was exit 70."""
    expected = (
        "herd: --agent: unknown agent 'foo'; choose one of claude, codex, gemini, amp, "
        "opencode, aider, plain\n"
    )
    fresh = run_herd(tmp_path, "init", "--agent", "foo")
    assert (fresh.returncode, fresh.stderr) == (2, expected)
    assert not (tmp_path / "herd.toml").exists()
    (tmp_path / "herd.toml").write_text("")
    present = run_herd(tmp_path, "init", "--agent", "foo")
    assert (present.returncode, present.stderr, present.stdout) == (2, expected, "")


def test_check_reports_a_missing_program_and_passes_a_good_file(tmp_path: Path) -> None:
    (tmp_path / "herd.toml").write_text('[[session]]\nname = "a"\ncommand = ["nope-not-here"]\n')
    bad = run_herd(tmp_path, "check")
    assert bad.returncode == 2 and "'nope-not-here' is not on PATH" in bad.stderr
    (tmp_path / "herd.toml").write_text('[[session]]\nname = "a"\ncommand = ["true"]\n')
    good = run_herd(tmp_path, "check")
    assert good.returncode == 0 and "ok (1 sessions)" in good.stdout


def test_check_names_the_price_table_a_named_model_lacks(tmp_path: Path) -> None:
    sessions = (
        '[[session]]\nname = "g"\nagent = "gemini"\ncommand = ["true", "-m", "gemini-3.8-flash"]\n'
        '[[session]]\nname = "c"\nagent = "claude"\ncommand = "true"\n'
        'env = { ANTHROPIC_MODEL = "claude-opus-5-5" }\n'
        '[[session]]\nname = "s"\nagent = "claude"\n'
        'command = ["true", "--model=claude-sonnet-4-5"]\n'
    )
    (tmp_path / "herd.toml").write_text(sessions)
    found = run_herd(tmp_path, "check")
    assert found.returncode == 0, found  # a warning: the sessions run, their cost unpriced
    lines = found.stderr.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith('warning: herd.toml: session "g": command: ')
    assert '[prices."gemini-3.8-flash"]' in lines[0]
    assert "[prices.claude-opus-5-5]" in lines[1]
    table = '[prices."gemini-3.8-flash"]\ninput_usd_per_mtok = 0.5\noutput_usd_per_mtok = 3.0\n'
    (tmp_path / "herd.toml").write_text(table + sessions.replace("claude-opus-5-5", "x"))
    priced = run_herd(tmp_path, "check")
    assert priced.returncode == 0 and "[prices.gemini" not in priced.stderr, priced
    assert "[prices.x]" in priced.stderr


def test_no_config_and_no_daemon_are_person_errors(tmp_path: Path) -> None:
    env_free = run_herd(tmp_path, "ls")
    assert env_free.returncode == 2 and "herd init" in env_free.stderr
    (tmp_path / "herd.toml").write_text('[[session]]\nname = "a"\ncommand = ["true"]\n')
    result = run_herd(tmp_path, "ls")
    assert result.returncode == 2
    assert result.stderr == ("herd: no herd daemon is running here; start one with `herd up`\n")


def test_up_refuses_a_bad_fleet_before_starting_anything(tmp_path: Path) -> None:
    (tmp_path / "herd.toml").write_text(
        '[[session]]\nname = "a"\ncommand = ["true"]\n'
        '[[session]]\nname = "b"\ncommand = ["true"]\ncwd = "missing"\n'
    )
    result = run_herd(tmp_path, "up", "--no-tui")
    assert result.returncode == 2 and "does not exist" in result.stderr
    assert not (tmp_path / ".herd" / "state.db").exists(), "nothing half-started"


def test_verbs_json_and_wait_exit_codes(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "ok"
        command = {script('print("fine")')}
        autostart = false

        [[session]]
        name = "bad"
        command = {script("import sys; sys.exit(2)")}
        restart = "never"
        autostart = false

        [[session]]
        name = "long"
        command = {SLEEPER}
        autostart = false
    """)
    herd.start()
    started = herd.cli("start", "ok", "--json")
    assert (
        json.loads(started.stdout) == {"handle": "ok/1", "session": "ok", "state": "running"}
        or "ok/1" in started.stdout
    )
    assert herd.cli("wait", "ok/1").returncode == 0
    assert herd.cli("start", "bad").stdout.strip() == "bad/1"
    failed = herd.cli("wait", "bad")
    assert failed.returncode == 1 and "failed" in failed.stdout
    assert herd.cli("start", "long").stdout.strip() == "long/1"
    timed_out = herd.cli("wait", "long/1", "--timeout", "0.2")
    assert timed_out.returncode == 124
    herd.cli("stop", "long")
    assert herd.cli("wait", "long/1").returncode == 3
    status = json.loads(herd.cli("status", "ok", "--json").stdout)
    for field in (
        "session",
        "handle",
        "run",
        "state",
        "task_state",
        "reason",
        "pid",
        "exit_code",
        "signal",
        "restarts",
        "started_at",
        "ended_at",
        "agent_session_id",
        "plan",
        "progress",
        "checkpoint",
        "usage",
        "budget",
        "logs",
        "warnings",
    ):
        assert field in status, field
    assert status["state"] == "completed" and status["exit_code"] == 0
    listing = json.loads(herd.cli("ls", "--json").stdout)
    assert [s["session"] for s in listing] == ["ok", "bad", "long"]
    table = herd.cli("ls").stdout
    assert table.splitlines()[0].startswith("SESSION") and "completed" in table


def test_unknown_session_is_a_person_error(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "api"
        command = {SLEEPER}
    """)
    herd.start()
    result = herd.cli("start", "nope")
    assert result.returncode == 2
    assert result.stderr == "herd: no session named 'nope' (sessions: api)\n"
    assert herd.cli("wait", "api/9").returncode == 2


def test_an_unknown_name_in_a_large_fleet_names_the_closest_not_all() -> None:
    """A fleet of 1,000 made the error one line of 6,000 characters: past 20 names, the
    closest three and the count."""
    from agentherd.supervisor.api.operations import known_names

    small = {f"s{i}": None for i in range(3)}
    assert known_names("s9", small) == "sessions: s0, s1, s2"
    large = {f"worker-{i}": None for i in range(1000)}
    words = known_names("worker-1O", large)
    assert words.startswith("did you mean worker-1, ") and len(words) < 120
    assert words.endswith("1000 sessions; `herd ls` lists them")
    assert known_names("zzz", large) == "1000 sessions; `herd ls` lists them"


def test_logs_are_inert_on_a_terminal_and_raw_when_piped(herd: Herd) -> None:
    noisy = script('print("\\x1b[31mred\\x1b[0m plain", flush=True)')
    herd.write(f"""
        [[session]]
        name = "noisy"
        command = {noisy}
    """)
    client = herd.start()
    client.call("start", name="noisy")
    herd.wait_state("noisy", "completed")
    piped = herd.cli("logs", "noisy")
    assert piped.stdout == "\x1b[31mred\x1b[0m plain\n", "piped output keeps the raw bytes"
    assert herd.status("noisy")["last_line"] == "red plain", "no escape reaches the dashboard"
    primary, secondary = pty.openpty()
    try:
        subprocess.run(
            [HERD, "logs", "noisy"],
            cwd=herd.root,
            stdout=secondary,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            timeout=30,
            check=True,
        )
        on_terminal = os.read(primary, 4096)
    finally:
        os.close(primary)
        os.close(secondary)
    # On a terminal the line reads as the dashboard shows it: colours dropped, nothing raw.
    assert b"\x1b" not in on_terminal and b"red plain\r\n" in on_terminal


def test_logs_follow_prints_new_output_and_the_next_run(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "ticker"
        command = {
        script('''
            import os, time
            for i in range(3):
                print("run", os.environ["HERD_RUN"], "tick", i, flush=True)
                time.sleep(0.05)
        ''')
    }
        restart = "always"
        restart_delay = "0.2s"
    """)
    herd.start().call("start", name="ticker")
    # Ctrl-C as a terminal sends it, whatever this runner inherited: a runner started in the
    # background (`cmd &` in a script) ignores SIGINT, and so would `herd`, never ending.
    with_ctrl_c = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    with_ctrl_c += "os.execv(sys.argv[1], sys.argv[1:])"
    follower = subprocess.Popen(
        [PY, "-c", with_ctrl_c, HERD, "logs", "ticker", "-f"],
        cwd=herd.root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        seen: list[str] = []

        def saw_the_next_run() -> bool:
            line = follower.stdout.readline()  # type: ignore[union-attr]
            seen.append(line)
            return line.split()[:2] != seen[0].split()[:2]  # "run N" of a later run

        # The follower may start during any run (a loaded machine starts `herd` slowly).
        wait_until(saw_the_next_run, timeout_s=20)
        assert seen[0].startswith("run ") and seen[-1].endswith("tick 0\n"), seen
    finally:
        follower.send_signal(signal.SIGINT)
        try:
            # Room for a starved process to exit on a loaded machine.
            follower.wait(60)
        finally:
            follower.kill()  # a no-op once it has ended; never left running
            follower.communicate()
            herd.client.call("stop", name="ticker", socket_timeout_s=None)


def test_events_json_lines_and_since(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "api"
        command = {script('print("ok")')}
    """)
    herd.start().call("start", name="api")
    herd.wait_state("api", "completed")
    lines = herd.cli("events", "--json").stdout.splitlines()
    events = [json.loads(line) for line in lines]
    assert all(set(e) == {"seq", "at", "session", "run", "kind", "message", "data"} for e in events)
    since = events[1]["seq"]
    later = [
        json.loads(x)
        for x in herd.cli("events", "--json", "--since", str(since)).stdout.splitlines()
    ]
    assert [e["seq"] for e in later] == [e["seq"] for e in events if e["seq"] > since]
    human = herd.cli("events", "--session", "api").stdout
    assert "api/1 run-started" in human
    assert herd.cli("events", "api").stdout == human, "NAME is --session's short form"
    both = herd.cli("events", "api", "--session", "web")
    assert both.returncode == 2 and "give one" in both.stderr


@pytest.mark.timeout(120)
def test_up_background_daemon_then_down_as_a_user_would(tmp_path: Path) -> None:
    (tmp_path / "herd.toml").write_text(
        f'[[session]]\nname = "api"\ncommand = {SLEEPER}\nstop_grace = "2s"\n'
    )
    up = run_herd(tmp_path, "up", "--no-tui")
    try:
        assert up.returncode == 0, up.stderr
        assert "api/1" in up.stdout
        again = run_herd(tmp_path, "up", "--no-tui")
        assert again.returncode == 0 and "started the daemon" not in again.stdout
        ls = run_herd(tmp_path, "ls")
        assert "running" in ls.stdout
        assert (tmp_path / ".herd" / "daemon.log").exists()
        assert (tmp_path / ".herd" / ".gitignore").read_text() == "*\n"
    finally:
        down = run_herd(tmp_path, "down")
    assert down.returncode == 0, down.stderr
    assert "api: stopped" in down.stdout
    # With no daemon, `ls` reads the state saved in .herd/ (issue 13 changed exit 2 to this).
    after = run_herd(tmp_path, "ls")
    assert after.returncode == 0 and "stopped" in after.stdout
    assert "no daemon is running" in after.stderr


def test_two_ups_at_once_end_with_one_daemon(tmp_path: Path) -> None:
    (tmp_path / "herd.toml").write_text(f'[[session]]\nname = "api"\ncommand = {SLEEPER}\n')
    procs = [
        subprocess.Popen(
            [HERD, "up", "--no-tui"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        for proc in procs:
            proc.wait(30)
            assert proc.returncode == 0, proc.stderr.read()  # type: ignore[union-attr]
        pid = int((tmp_path / ".herd" / "daemon.lock").read_text())
        wait_until(
            lambda: (
                len(
                    [
                        p
                        for p in _processes_running("agentherd.supervisor.main")
                        if str(tmp_path) in " ".join(p)
                    ]
                )
                == 1
            ),
            what="one daemon",
        )
        assert "Traceback" not in (tmp_path / ".herd" / "daemon.log").read_text()
        assert os.path.exists(f"/proc/{pid}")
        starts = [e for e in _events(tmp_path) if e["kind"] == "run-started"]
        assert len(starts) == 1, "one agent, not two"
    finally:
        run_herd(tmp_path, "down")


def _processes_running(needle: str) -> list[list[str]]:
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if any(needle in part for part in cmdline):
            found.append(cmdline)
    return found


def _events(cwd: Path) -> list[dict[str, object]]:
    out = run_herd(cwd, "events", "--json").stdout
    return [json.loads(line) for line in out.splitlines()]


def test_a_client_of_another_protocol_is_told_plainly(herd: Herd) -> None:
    import socket

    herd.write(f"""
        [[session]]
        name = "api"
        command = {SLEEPER}
    """)
    herd.start()
    assert herd.daemon is not None
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(str(herd.daemon.socket_path))
        sock.sendall(b'{"op": "hello", "version": "9.9.9", "protocol": 999}\n')
        reply = json.loads(sock.makefile().readline())
    assert reply["ok"] is False and reply["error"]["code"] == "version-mismatch"
    assert "herd down && herd up" in reply["error"]["message"]


def test_up_again_after_editing_herd_toml_reads_it_again(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "api"
        command = {SLEEPER}
        stop_grace = "2s"

        [[session]]
        name = "old"
        command = {SLEEPER}
        autostart = false
    """)
    herd.start().call("start", name="api")
    herd.wait_state("api", "running")
    (herd.root / "web").mkdir()  # its own folder: two sessions never run in one at once
    herd.write(f"""
        [[session]]
        name = "api"
        command = {SLEEPER}
        stop_grace = "3s"

        [[session]]
        name = "web"
        cwd = "web"
        command = {SLEEPER}
        stop_grace = "2s"
    """)
    result = herd.cli("up", "--no-tui")
    assert result.returncode == 0, result.stderr
    assert "added: web" in result.stdout and "changed: api" in result.stdout
    assert "removed: old" in result.stdout
    herd.wait_state("web", "running")
    assert [s["session"] for s in herd.client.call("ls")] == ["api", "web"]
    herd.config_path.write_text("[[session]]\nname = 'api'\n")
    broken = herd.cli("up", "--no-tui")
    assert broken.returncode == 2 and "command: required" in broken.stderr
    assert [s["session"] for s in herd.client.call("ls")] == ["api", "web"], "nothing changed"
