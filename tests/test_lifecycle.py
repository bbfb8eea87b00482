"""Runs under the real daemon: start, exit detection, restart policies, backoff, stop, handles."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psutil
import pytest
from conftest import PY, TEST_ID_VAR, Herd, pid_gone, script, wait_until

SLEEPER = script("""
    import time
    print("ready", flush=True)
    time.sleep(60)
""")


def test_start_runs_the_command_and_records_a_clean_exit(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "once"
        command = {script('print("hello from the agent")')}
        restart = "on-failure"
    """)
    client = herd.start()
    started = client.call("start", name="once")
    assert started["handle"] == "once/1"
    status = herd.wait_state("once", "completed")
    assert status["exit_code"] == 0 and status["signal"] is None
    assert status["last_line"] == "hello from the agent"
    assert status["task_state"] == "completed"
    # The folder is no git repository: its warning (and, when it came before the start, the
    # new task's closing of it) may come at any point.
    kinds = [
        e["kind"]
        for e in herd.events("once")
        if "not-a-git-repo" not in (e["kind"], e["data"].get("kind"))
    ]
    assert kinds == ["task-started", "run-started", "run-exited", "completed"]


def test_start_while_running_returns_the_current_handle(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "api"
        command = {SLEEPER}
    """)
    client = herd.start()
    first = client.call("start", name="api")
    herd.wait_state("api", "running")
    again = client.call("start", name="api")
    assert again["handle"] == first["handle"] == "api/1"
    assert len(herd.events("api", "run-started")) == 1


def test_restart_never_fails_the_task_on_a_crash(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "crash"
        command = {script("import sys; sys.exit(7)")}
        restart = "never"
    """)
    herd.start().call("start", name="crash")
    status = herd.wait_state("crash", "failed")
    assert status["exit_code"] == 7 and status["reason"] == "exit 7"
    assert status["restarts"] == 0


def test_on_failure_restarts_a_crash_and_completes_after_a_clean_run(herd: Herd) -> None:
    marker = herd.root / "crashed-once"
    herd.write(f"""
        [[session]]
        name = "flaky"
        command = {
        script(f'''
            import pathlib, sys
            marker = pathlib.Path({str(marker)!r})
            if not marker.exists():
                marker.write_text("x")
                sys.exit(1)
            print("second time lucky")
        ''')
    }
        restart = "on-failure"
        restart_delay = 0
    """)
    herd.start().call("start", name="flaky")
    status = herd.wait_state("flaky", "completed")
    assert status["handle"] == "flaky/1", "automatic restarts keep the task handle"
    assert status["run"] == 2 and status["restarts"] == 1


def test_always_restarts_even_a_clean_exit(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "loop"
        command = {script('print("done")')}
        restart = "always"
        restart_delay = 0
    """)
    herd.start().call("start", name="loop")
    wait_until(lambda: herd.status("loop")["run"] >= 3, what="three runs")
    herd.client.call("stop", name="loop", socket_timeout_s=None)
    status = herd.wait_state("loop", "stopped")
    assert status["handle"] == "loop/1"
    assert all(not e["data"]["crashed"] for e in herd.events("loop", "restart-scheduled"))


def test_backoff_doubles_and_a_crash_loop_ends_failed(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "crashy"
        command = {script("import sys; sys.exit(1)")}
        restart_delay = "0.05s"
        restart_delay_max = "0.3s"
        max_crashes = 5
    """)
    herd.start().call("start", name="crashy")
    status = herd.wait_state("crashy", "failed")
    assert status["reason"] == "crash-loop"
    delays = [e["data"]["delay_s"] for e in herd.events("crashy", "restart-scheduled")]
    assert delays == [0.05, 0.1, 0.2, 0.3], "doubling, capped at restart_delay_max"
    assert status["run"] == 5 and status["handle"] == "crashy/1"


@pytest.mark.pidns
def test_stop_escalates_to_sigkill_for_a_child_that_ignores_sigterm(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "stubborn"
        command = {
        script('''
            import signal, subprocess, sys, time
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            child = subprocess.Popen([sys.executable, "-c",
                "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "time.sleep(60)"])
            print("child", child.pid, flush=True)
            time.sleep(60)
        ''')
    }
        stop_grace = "0.3s"
    """)
    client = herd.start()
    client.call("start", name="stubborn")
    wait_until(lambda: herd.status("stubborn")["last_line"].startswith("child"))
    child_pid = int(herd.status("stubborn")["last_line"].split()[1])
    result = client.call("stop", name="stubborn", socket_timeout_s=None)
    assert result["state"] == "stopped" and result["reason"] == "user"
    assert result["signal"] == "SIGKILL"
    assert pid_gone(child_pid)


@pytest.mark.pidns
def test_kill_is_immediate(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "api"
        command = {SLEEPER}
        stop_grace = "30s"
    """)
    client = herd.start()
    client.call("start", name="api")
    herd.wait_state("api", "running")
    result = client.call("stop", name="api", kill=True, socket_timeout_s=None)
    assert result["state"] == "stopped" and result["signal"] == "SIGKILL"


def test_stop_during_backoff_cancels_the_restart(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "crashy"
        command = {script("import sys; sys.exit(1)")}
        restart_delay = "30s"
    """)
    client = herd.start()
    client.call("start", name="crashy")
    herd.wait_state("crashy", "backoff")
    client.call("stop", name="crashy", socket_timeout_s=None)
    assert herd.status("crashy")["state"] == "stopped"
    assert herd.status("crashy")["run"] == 1


def test_spawn_failure_fails_that_session_and_the_others_run(herd: Herd) -> None:
    (herd.root / "not-executable.sh").write_text("echo hi\n")
    herd.write(f"""
        [[session]]
        name = "broken"
        command = ["./not-executable.sh"]

        [[session]]
        name = "fine"
        command = {SLEEPER}
    """)
    client = herd.start()
    client.call("up")
    broken = herd.wait_state("broken", "failed")
    assert broken["reason"] == "spawn-failed"
    assert "Permission denied" in herd.events("broken", "failed")[0]["message"]
    assert herd.wait_state("fine", "running")["pid"]


@pytest.mark.pidns
def test_pause_and_resume_stop_and_continue_the_whole_group(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "api"
        command = {SLEEPER}
        stop_grace = "2s"
    """)
    client = herd.start()
    client.call("start", name="api")
    pid = herd.wait_state("api", "running")["pid"]
    client.call("pause", name="api")
    # `pause` answers once every process showed stopped; a loaded CI once read the agent as
    # disk-sleep right after (a stopped task the kernel touched): it settles back to stopped.
    wait_until(lambda: psutil.Process(pid).status() == psutil.STATUS_STOPPED, 5, "stopped")
    client.call("resume", name="api")
    wait_until(lambda: psutil.Process(pid).status() != psutil.STATUS_STOPPED, what="SIGCONT")
    client.call("pause", name="api")
    stopped = client.call("stop", name="api", socket_timeout_s=None)
    assert stopped["state"] == "stopped" and stopped["signal"] == "SIGTERM", (
        "a paused run is continued so the stop signal lands"
    )


def test_pause_right_after_start_stops_the_agent_and_stop_ends_it_with_its_signal(
    herd: Herd,
) -> None:
    # Many missing PATH folders keep the wrapper searching (tens of ms) before it execs the
    # agent: a signal sent then was the wrapper's (its trap swallowed the stop signal).
    slow_path = ":".join(f"/m{i}" for i in range(15000)) + ":" + str(Path(PY).parent)
    herd.write(f"""
        [[session]]
        name = "api"
        command = ["{Path(PY).name}", "-c", "import time; time.sleep(60)"]
        env = {{ PATH = "{slow_path}" }}
        stop_grace = "2s"
    """)
    client = herd.start()
    client.call("start", name="api")
    pid = client.call("status", target="api")["pid"]
    client.call("pause", name="api")
    leader = psutil.Process(pid)
    run = [leader, *leader.children(recursive=True)]
    assert len(run) == 2, "the agent was started before `start` answered"
    assert all(proc.status() == psutil.STATUS_STOPPED for proc in run), (
        "`pause` answers once every process of the run is stopped"
    )
    stopped = client.call("stop", name="api", socket_timeout_s=None)
    assert stopped["state"] == "stopped" and stopped["signal"] == "SIGTERM"


def test_a_handle_names_its_task_after_the_session_moved_on(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "api"
        command = {script('print("ok")')}
    """)
    client = herd.start()
    client.call("start", name="api")
    herd.wait_state("api", "completed")
    second = client.call("start", name="api")
    assert second["handle"] == "api/2"
    herd.wait_state("api", "completed")
    first = client.call("status", target="api/1")
    assert first["state"] == "completed" and first["handle"] == "api/1"


def test_the_event_log_survives_a_daemon_restart(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "api"
        command = {script('print("ok")')}
    """)
    client = herd.start()
    client.call("start", name="api")
    herd.wait_state("api", "completed")
    before = herd.events()
    herd.stop_daemon()
    herd.start()

    # The socket answers before the new daemon has written daemon-started: wait for it.
    def restarted() -> list[dict[str, Any]] | None:
        found = herd.events()
        return found if [e["kind"] for e in found].count("daemon-started") == 2 else None

    after = wait_until(restarted, what="the new daemon's daemon-started event")
    assert after[: len(before)] == before
    new = after[len(before) :]
    assert [e["kind"] for e in new].count("daemon-started") == 1
    assert all(e["seq"] > before[-1]["seq"] for e in new)
    assert herd.status("api")["state"] == "completed"


@pytest.mark.pidns
def test_twenty_concurrent_restarts_leave_exactly_one_agent(herd: Herd) -> None:
    from concurrent.futures import ThreadPoolExecutor

    herd.write(f"""
        [[session]]
        name = "api"
        command = {SLEEPER}
        stop_grace = "2s"
    """)
    client = herd.start()
    client.call("start", name="api")
    herd.wait_state("api", "running")
    with ThreadPoolExecutor(max_workers=20) as pool:
        handles = list(
            pool.map(
                lambda _: herd.client.call("restart", name="api", socket_timeout_s=None), range(20)
            )
        )
    assert len({h["handle"] for h in handles}) == 20, "each restart began its own task"
    status = herd.wait_state("api", "running")

    def agents() -> list[psutil.Process]:
        return [
            p
            for p in psutil.process_iter(["cmdline"])
            if any("time.sleep(60)" in part for part in (p.info["cmdline"] or []))
            and p.status() != psutil.STATUS_ZOMBIE
            and _environ(p).get(TEST_ID_VAR) == os.environ[TEST_ID_VAR]
            and "HERD_RUN_TAG" in _environ(p)
            and p.name().startswith("python")
        ]

    # `running` means the wrapper is spawned; it starts the agent once in the run's cgroup.
    wait_until(agents, what="the last run's agent")
    assert len(agents()) == 1, agents()
    assert status["handle"] == max(
        (h["handle"] for h in handles), key=lambda h: int(h.split("/")[1])
    )


def _environ(proc: psutil.Process) -> dict[str, str]:
    try:
        return proc.environ()
    except psutil.Error:
        return {}


def test_a_start_that_comes_before_the_reconcile_waits_for_it(
    herd: Herd, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request answered before the stored states were reconciled launched a run that the
    reconcile then adopted a second time (`adopted` in a fresh daemon's first run)."""
    import threading

    import anyio

    from agentherd.supervisor.daemon import Daemon

    gate = threading.Event()
    cleaning = Daemon._clean_verify_leftovers

    async def held_cleaning(self: Daemon) -> None:
        await anyio.to_thread.run_sync(gate.wait)
        await cleaning(self)

    monkeypatch.setattr(Daemon, "_clean_verify_leftovers", held_cleaning)
    herd.write(f"""
        [[session]]
        name = "once"
        command = {script('print("hello")')}
    """)
    client = herd.start()  # it answers on its socket before the reconcile
    answers: list[dict[str, Any]] = []
    asker = threading.Thread(target=lambda: answers.append(client.call("start", name="once")))
    asker.start()
    asker.join(timeout=1.0)  # a start served at once returned within this
    try:
        assert answers == [], "the start was served before the sessions were reconciled"
    finally:
        gate.set()
        asker.join(timeout=10)
    assert answers and answers[0]["handle"] == "once/1"
    herd.wait_state("once", "completed")
    assert herd.events("once", "adopted") == []
