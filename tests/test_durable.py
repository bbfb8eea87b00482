"""Durable supervision: agents outlive the daemon, stops leave nothing, crashes resume from git."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import anyio
import psutil
import pytest
from conftest import HERD, SIMAGENT, TEST_ID_VAR, Herd, git, make_repo, pid_gone, script, wait_until
from conftest import sim_repo as conftest_sim_repo

from agentherd.supervisor.checks.checkpoints import CheckpointWatch


def sim_session(name: str, repo: Path, *options: str, restart: str = "on-failure") -> str:
    """A [[session]] block running the simulated agent in `repo`."""
    command = json.dumps([*SIMAGENT, *options])
    resume = json.dumps([*SIMAGENT, "--resume", "{session_id}", *options])
    return f"""
[[session]]
name = "{name}"
cwd = "{repo}"
agent = "claude"
command = {command}
resume = {resume}
plan = "feature_list.json"
progress = "claude-progress.txt"
restart = "{restart}"
restart_delay = 0
stop_grace = "3s"
"""


def sim_repo(path: Path, features: int = 4, ignored: bool = False) -> Path:
    """A simulated agent's repo; with `ignored`, a committed `*.log` ignore and an ignored file."""
    conftest_sim_repo(path, features)
    if ignored:
        with open(path / ".gitignore", "a") as ignore:
            ignore.write("*.log\n")
        git(path, "commit", "-q", "-am", "ignore logs")
        (path / "debug.log").write_text("ignored, must survive a reset\n")
    return path


def run_herd(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HERD, *args], cwd=cwd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )


def events_of(cwd: Path) -> list[dict[str, object]]:
    out = run_herd(cwd, "events", "--json").stdout
    return [json.loads(line) for line in out.splitlines()]


@pytest.mark.pidns
@pytest.mark.timeout(180)
def test_kill_9_of_the_daemon_readopts_live_agents_and_restarts_a_dead_one(
    tmp_path: Path,
) -> None:
    blocks = [
        sim_session(f"a{i}", sim_repo(tmp_path / f"a{i}"), "--delay", "2.5") for i in range(5)
    ]
    crasher = make_repo(tmp_path / "c")
    go = tmp_path / "crash-now"
    crash_later = script(f"""
        import json, pathlib, sys, time
        if sys.argv[1:] == ["resumed"]:
            print(json.dumps({{"type": "result", "subtype": "success", "is_error": False,
                              "session_id": "crash-sess-1", "num_turns": 1}}), flush=True)
            sys.exit(0)
        print(json.dumps({{"type": "system", "subtype": "init", "session_id": "crash-sess-1"}}),
              flush=True)
        pathlib.Path("README.md").write_text("half an edit")
        while not pathlib.Path({str(go)!r}).exists():
            time.sleep(0.02)
        sys.exit(3)
    """)
    blocks.append(f"""
[[session]]
name = "c"
cwd = "{crasher}"
agent = "claude"
command = {crash_later}
resume = {json.dumps(json.loads(crash_later) + ["resumed"])}
restart_delay = 0
""")
    (tmp_path / "herd.toml").write_text("".join(blocks))
    assert run_herd(tmp_path, "up", "--no-tui").returncode == 0
    try:

        def all_running() -> list[dict[str, object]] | None:
            listing = json.loads(run_herd(tmp_path, "ls", "--json").stdout)
            ready = all(s["state"] == "running" and s["agent_session_id"] for s in listing)
            return listing if ready else None

        statuses = wait_until(all_running, what="six running agents with session ids")
        agent_pids = {s["session"]: s["pid"] for s in statuses}
        daemon_pid = int((tmp_path / ".herd" / "daemon.lock").read_text())
        os.kill(daemon_pid, signal.SIGKILL)
        wait_until(lambda: pid_gone(daemon_pid))
        # The crasher dies while no daemon runs; the others keep running and writing.
        go.write_text("now")
        wait_until(
            lambda: (tmp_path / ".herd/runs/c/1/exit_status").exists(),
            timeout_s=30,
            what="the crasher to crash while the daemon is dead",
        )
        for name, pid in agent_pids.items():
            if name != "c":
                assert psutil.pid_exists(pid), f"{name} died with the daemon"
        log_size = (tmp_path / ".herd/runs/a0/1/output.log").stat().st_size
        wait_until(
            lambda: (tmp_path / ".herd/runs/a0/1/output.log").stat().st_size > log_size,
            what="output to keep landing while no daemon runs",
        )

        began = time.monotonic()
        assert run_herd(tmp_path, "up", "--no-tui").returncode == 0

        def adoptions() -> list[dict[str, object]] | None:
            found = [e for e in events_of(tmp_path) if e["kind"] == "adopted"]
            return found if len(found) == 5 else None

        adopted = wait_until(adoptions, what="five adoptions")
        readopt_s = time.monotonic() - began
        assert sorted(str(e["session"]) for e in adopted) == [f"a{i}" for i in range(5)]
        print(f"re-adopted 5 agents {readopt_s:.2f}s after `herd up` began (CLI start included)")

        for name in [f"a{i}" for i in range(5)] + ["c"]:
            waited = subprocess.run(
                [HERD, "wait", name, "--timeout", "60"],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=90,
            )
            assert waited.returncode == 0, (name, waited.stdout, waited.stderr)
        events = events_of(tmp_path)
        for i in range(5):
            starts = [e for e in events if e["session"] == f"a{i}" and e["kind"] == "run-started"]
            assert len(starts) == 1, f"a{i} was started twice"
            exits = [e for e in events if e["session"] == f"a{i}" and e["kind"] == "run-exited"]
            assert exits[-1]["data"]["exit_code"] == 0, "the wrapper told the new daemon"
        c_events = [e for e in events if e["session"] == "c"]
        kinds = [e["kind"] for e in c_events]
        assert "rescue-saved" in kinds and "worktree-reset" in kinds
        resumed = [e for e in c_events if e["kind"] == "run-started"][-1]
        assert resumed["data"]["mode"] == "resume", "\n".join(
            f"{e['kind']}: {e['message']}" for e in c_events
        )
        assert git(crasher, "status", "--porcelain") == "", "reset to the checkpoint"
        assert git(crasher, "show", "refs/herd/c/rescue/1:README.md") == "half an edit"
    finally:
        run_herd(tmp_path, "down")


def test_a_crash_mid_edit_is_rescued_reset_and_resumed(herd: Herd) -> None:
    repo = sim_repo(herd.root / "repo", features=3, ignored=True)
    herd.write(sim_session("api", repo, "--delay", "0", "--crash-at", "2", "--crash-once"))
    herd.start().call("start", name="api")
    status = herd.wait_state("api", "completed", timeout_s=30)
    first_id = herd.events("api", "run-started")[0]
    assert first_id["data"]["mode"] == "command"
    resumed = herd.events("api", "run-started")[1]
    assert resumed["data"]["mode"] == "resume"
    assert resumed["data"]["argv"][-2:] == ["--resume", status["agent_session_id"]] or (
        status["agent_session_id"] in resumed["data"]["argv"]
    )
    rescue = herd.events("api", "rescue-saved")[0]["data"]
    assert rescue["ref"] == "refs/herd/api/rescue/1"
    files = git(repo, "ls-tree", "-r", "--name-only", rescue["ref"]).split()
    assert "src/wip_2.py" in files, "the untracked edit is in the rescue ref"
    tracked_diff = git(repo, "diff", "--name-only", f"{rescue['ref']}~1", rescue["ref"])
    assert "src/wip_2.py" in tracked_diff and len(tracked_diff.split()) == 2, (
        "the modified tracked file is in the rescue ref too"
    )
    assert "debug.log" not in files, "ignored files are not rescued"
    assert (repo / "debug.log").read_text() == "ignored, must survive a reset\n"
    reset = herd.events("api", "worktree-reset")[0]["data"]
    assert reset["sha"] == git(repo, "rev-parse", f"{rescue['ref']}~1").strip()
    second_log = (herd.root / ".herd/runs/api/2/output.log").read_text()
    init = json.loads(second_log.splitlines()[0])
    assert init["session_id"] == status["agent_session_id"]
    assert init["rescue_ref"] == "refs/herd/api/rescue/1"
    assert git(repo, "status", "--porcelain").strip() == ""


def test_the_restarted_run_gets_its_environment_and_placeholders(herd: Herd) -> None:
    repo = make_repo(herd.root / "repo")
    dump = herd.root / "env.json"
    agent = script(f"""
        import json, os, pathlib, sys
        out = pathlib.Path({str(dump)!r})
        runs = json.loads(out.read_text()) if out.exists() else []
        runs.append({{"argv": sys.argv[1:], "env": {{k: v for k, v in os.environ.items()
                                                      if k.startswith("HERD_")}}}})
        out.write_text(json.dumps(runs))
        print(json.dumps({{"session_id": "sess-42"}}), flush=True)
        pathlib.Path("scratch.txt").write_text("half done")
        sys.exit(0 if len(runs) > 1 else 5)
    """)
    resume = json.loads(agent) + ["{session_id}", "{checkpoint}", "{rescue_ref}", "{run}"]
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{repo}"
        command = {agent}
        resume = {json.dumps(resume)}
        restart_delay = 0
    """)
    herd.start().call("start", name="api")
    herd.wait_state("api", "completed")
    first, second = json.loads(dump.read_text())
    head = git(repo, "rev-parse", "HEAD").strip()
    assert second["argv"] == ["sess-42", head, "refs/herd/api/rescue/1", "2"]
    env = second["env"]
    assert env["HERD_SESSION"] == "api" and env["HERD_RUN"] == "2"
    assert env["HERD_CHECKPOINT"] == head and env["HERD_RESCUE_REF"] == "refs/herd/api/rescue/1"
    assert env["HERD_RESTART_COUNT"] == "1" and env["HERD_LAST_EXIT"] == "exit 5"
    assert first["env"]["HERD_RESCUE_REF"] == ""


def test_a_session_id_that_does_not_look_like_one_is_refused(herd: Herd) -> None:
    repo = make_repo(herd.root / "repo")
    marker = herd.root / "ran-once"
    agent = script(f"""
        import json, pathlib, sys
        marker = pathlib.Path({str(marker)!r})
        print(json.dumps({{"session_id": "$(rm -rf /)"}}), flush=True)
        if not marker.exists():
            marker.write_text("x")
            sys.exit(1)
    """)
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{repo}"
        command = {agent}
        resume = ["false", "{{session_id}}"]
        restart_delay = 0
    """)
    herd.start().call("start", name="api")
    herd.wait_state("api", "completed")
    modes = [e["data"]["mode"] for e in herd.events("api", "run-started")]
    assert modes == ["command", "command"]


def test_not_a_git_repo_still_restarts_and_says_so_once(herd: Herd) -> None:
    plain = herd.root / "plain"
    plain.mkdir()
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{plain}"
        command = {script("import sys; sys.exit(1)")}
        restart_delay = 0
        max_crashes = 3
    """)
    herd.start().call("start", name="api")
    herd.wait_state("api", "failed")
    assert len(herd.events("api", "not-a-git-repo")) == 1
    assert len(herd.events("api", "run-started")) == 3


def test_restart_from_a_sha_rescues_and_resets_on_demand(herd: Herd) -> None:
    repo = make_repo(herd.root / "repo")
    first = git(repo, "rev-parse", "HEAD").strip()
    (repo / "later.txt").write_text("later\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "later")
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{repo}"
        command = {script("import time; time.sleep(60)")}
        stop_grace = "2s"
    """)
    client = herd.start()
    client.call("start", name="api")
    herd.wait_state("api", "running")
    (repo / "dirty.txt").write_text("unsaved\n")
    result = client.call("restart", name="api", socket_timeout_s=None, **{"from": first[:10]})
    assert result["handle"] == "api/2"
    assert git(repo, "rev-parse", "HEAD").strip() == first
    assert not (repo / "dirty.txt").exists() and not (repo / "later.txt").exists()
    ref = herd.events("api", "rescue-saved")[0]["data"]["ref"]
    assert "dirty.txt" in git(repo, "ls-tree", "-r", "--name-only", ref)
    assert herd.status("api")["restarts"] == 0, "a restart a person asks for is no crash"
    bad = herd.cli("restart", "api", "--from", "no-such-rev")
    assert bad.returncode == 2 and "no commit" in bad.stderr


@pytest.mark.pidns
def test_stop_leaves_no_setsid_or_double_forked_descendant(herd: Herd) -> None:
    pids_file = herd.root / "pids"
    herd.write(f"""
        [[session]]
        name = "forky"
        command = {
        script(f'''
            import os, subprocess, sys, time
            escaped = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                       start_new_session=True)
            if os.fork() == 0:          # double fork: the grandchild is reparented to init
                if os.fork() == 0:
                    os.setsid()
                    time.sleep(60)
                os._exit(0)
            open({str(pids_file)!r}, "w").write(str(escaped.pid))
            print("spawned", flush=True)
            time.sleep(60)
        ''')
    }
        stop_grace = "1s"
    """)
    client = herd.start()
    client.call("start", name="forky")
    wait_until(lambda: herd.status("forky")["last_line"] == "spawned")
    tag_holders = _tagged()
    assert len(tag_holders) >= 4, "wrapper, agent, setsid child, double-forked grandchild"
    client.call("stop", name="forky", socket_timeout_s=None)
    assert _tagged() == [], "nothing of the run survives a stop"


def _tagged() -> list[int]:
    """Agent processes started by this test (other tests may run beside it)."""
    found = []
    for proc in psutil.process_iter(["pid", "status"]):
        if proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            env = proc.environ()
            if "HERD_RUN_TAG" in env and env.get(TEST_ID_VAR) == os.environ[TEST_ID_VAR]:
                found.append(proc.pid)
        except (psutil.Error, OSError):
            continue
    return found


@pytest.mark.pidns
def test_leftovers_of_an_exited_run_are_swept_before_the_restart(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "leaky"
        command = {
        script('''
            import subprocess, sys
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             start_new_session=True)
            print("leader exits, child lingers", flush=True)
        ''')
    }
        restart = "never"
        stop_grace = "1s"
    """)
    herd.start().call("start", name="leaky")
    herd.wait_state("leaky", "completed")
    wait_until(lambda: _tagged() == [], what="the lingering child to be swept")


WEIRD_OUTPUT = script("""
    import sys
    out = sys.stdout.buffer
    out.write(b"x" * (1 << 20) + b"\\n")        # a 1 MB line
    out.write(bytes(range(256)) + b"\\n")       # binary garbage
    out.write(b"\\xff\\xfe invalid utf-8\\n")
    out.write(b"last line without newline")
    out.flush()
""")


def test_output_bounded_and_complete(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "weird"
        command = {WEIRD_OUTPUT}
        restart = "never"
    """)
    herd.start().call("start", name="weird")
    status = herd.wait_state("weird", "completed")
    assert status["last_line"] == "last line without newline"
    log = (herd.root / ".herd/runs/weird/1/output.log").read_bytes()
    assert log.endswith(b"last line without newline") and len(log) > 1 << 20


def test_log_max_bytes_deletes_the_oldest_runs_first(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "chatty"
        command = {script('print("y" * 3000)')}
        restart = "always"
        restart_delay = 0
        log_max_bytes = 10000
    """)
    client = herd.start()
    client.call("start", name="chatty")
    wait_until(lambda: herd.status("chatty")["run"] >= 6, what="six runs")
    client.call("stop", name="chatty", socket_timeout_s=None)
    status = herd.status("chatty")
    assert status["logs"]["cap_bytes"] == 10000
    assert status["logs"]["bytes"] <= 10000 + 3001
    runs = herd.root / ".herd/runs/chatty"
    assert not (runs / "1" / "output.log").exists(), "the oldest run's log went first"
    assert (runs / str(status["run"]) / "output.log").exists()
    assert herd.events("chatty", "log-capped")


def test_a_restart_storm_cannot_happen_with_zero_delay_and_a_crash_loop(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "storm"
        command = {script("import sys; sys.exit(1)")}
        restart_delay = 0
        max_crashes = 4
        crash_window = "1h"
    """)
    herd.start().call("start", name="storm")
    status = herd.wait_state("storm", "failed")
    assert status["reason"] == "crash-loop" and status["run"] == 4


@pytest.mark.pidns
def test_an_exit_nobody_saw_is_null_and_counts_as_a_crash(herd: Herd) -> None:
    repo = make_repo(herd.root / "repo")
    herd.write(f"""
        [[session]]
        name = "lost"
        cwd = "{repo}"
        command = {script("import time; print('working', flush=True); time.sleep(60)")}
        restart_delay = "30s"
    """)
    client = herd.start()
    client.call("start", name="lost")
    pid = herd.wait_state("lost", "running")["pid"]
    herd.stop_daemon()
    os.killpg(pid, signal.SIGKILL)  # the wrapper dies too: no exit status is written
    wait_until(lambda: _gone(pid))
    herd.start()
    exited = wait_until(lambda: herd.events("lost", "run-exited"))
    assert exited[0]["data"]["exit_code"] is None and exited[0]["data"]["signal"] is None
    assert exited[0]["data"]["outcome"] == "exit unknown"
    status = herd.wait_state("lost", "backoff")
    assert status["reason"] == "crashed" and status["next_restart_at"]
    herd.client.call("stop", name="lost", socket_timeout_s=None)


@pytest.mark.pidns
def test_an_unseen_exit_after_a_success_result_is_a_success(herd: Herd) -> None:
    repo = make_repo(herd.root / "repo")
    herd.write(f"""
        [[session]]
        name = "done"
        cwd = "{repo}"
        agent = "claude"
        command = {
        script('''
            import json, time
            print(json.dumps({"type": "system", "subtype": "init", "session_id": "s-1"}))
            print(json.dumps({"type": "result", "subtype": "success", "is_error": False,
                              "session_id": "s-1", "num_turns": 1}), flush=True)
            time.sleep(60)
        ''')
    }
    """)
    client = herd.start()
    client.call("start", name="done")
    wait_until(lambda: herd.status("done")["last_line"].startswith("result"))
    pid = herd.status("done")["pid"]
    herd.stop_daemon()
    os.killpg(pid, signal.SIGKILL)
    wait_until(lambda: _gone(pid))
    herd.start()
    status = herd.wait_state("done", "completed")
    assert status["exit_code"] is None, "never invented"


@pytest.mark.pidns
def test_a_process_that_forks_while_being_killed_is_still_stopped(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "spawner"
        command = {
        script('''
            import os, signal, time
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            print("spawning", flush=True)
            while True:          # keeps making short-lived children, each in a new session
                if os.fork() == 0:
                    os.setsid()
                    time.sleep(60)
                    os._exit(0)
                time.sleep(0.002)
        ''')
    }
        stop_grace = "0.2s"
    """)
    client = herd.start()
    client.call("start", name="spawner")
    wait_until(lambda: herd.status("spawner")["last_line"] == "spawning")
    result = client.call("stop", name="spawner", socket_timeout_s=None)
    assert result["state"] == "stopped"
    assert _tagged() == []


def _gone(pid: int) -> bool:
    """True once `pid` has exited (a zombie counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_log_deleted_or_replaced_while_written_does_not_stop_the_reading(tmp_path: Path) -> None:
    from agentherd.supervisor.files.tailer import LogTailer

    log = tmp_path / "output.log"
    log.write_bytes(b"one\n")
    tailer = LogTailer(log)
    assert tailer.read_new() == b"one\n"
    with open(log, "ab") as writer:
        log.unlink()  # deleted while the agent still appends to it
        writer.write(b"two\n")
        writer.flush()
        assert tailer.read_new() == b"two\n"
    log.write_bytes(b"three\n")  # a new file at the same path
    tailer._next_check = 0.0  # the idle check is rate-limited; make it due now
    assert tailer.read_new() == b"three\n"
    log.write_bytes(b"")  # truncated
    with open(log, "ab") as writer:
        writer.write(b"four\n")
    assert tailer.read_new() == b"four\n" and tailer.truncations == 1
    tailer.close()


@pytest.mark.timeout(60)
def test_a_task_begun_but_never_recorded_as_a_run_is_launched_by_the_next_daemon(
    herd: Herd,
) -> None:
    """The daemon died after `starting` was written and before the run was: nothing ran, so the
    next daemon launches it (it used to end the task `failed (lost)`: 6 of 8 sessions in a long
    chaos run once start-up ran four sessions at once)."""
    from agentherd.sessions.records import SessionRecord, TaskRecord
    from agentherd.sessions.states import State
    from agentherd.sessions.times import iso, utc_now
    from agentherd.supervisor.files.paths import prepare_state_dir
    from agentherd.supervisor.files.store import Change, Store

    marker = herd.root / "ran"
    agent = script(f"import pathlib, time; pathlib.Path({str(marker)!r}).touch(); time.sleep(60)")
    herd.write(f"""
        [[session]]
        name = "api"
        command = {agent}
        autostart = false
    """)
    state = herd.root / ".herd"
    prepare_state_dir(state)
    store = Store(state / "state.db")
    now = iso(utc_now())
    store.commit(
        Change(
            session=SessionRecord(
                name="api", state=State.STARTING, handle="api/1", task_started_at=now
            ),
            task=TaskRecord(handle="api/1", session="api", first_run=1, started_at=now),
        )
    )
    store.close()
    herd.start()
    status = herd.wait_state("api", "running", "failed", timeout_s=30)
    assert status["state"] == "running", status
    assert status["handle"] == "api/1" and status["run"] == 1
    wait_until(marker.exists, 20, "the agent to run")
    assert [e["data"]["mode"] for e in herd.events("api", "run-started")] == ["command"]


@pytest.mark.timeout(60)
def test_a_run_whose_end_was_recorded_but_not_judged_is_judged_by_the_next_daemon(
    herd: Herd,
) -> None:
    """The daemon died after recording the run's end (a crash, exit 3) and before the exit rules
    moved the task on: the next daemon applies them (a restart), never `failed (lost)` (2 of 8
    sessions of a long chaos run ended so)."""
    from agentherd.sessions.records import RunRecord, SessionRecord, TaskRecord
    from agentherd.sessions.states import State
    from agentherd.sessions.times import iso, utc_now
    from agentherd.supervisor.files.paths import prepare_state_dir
    from agentherd.supervisor.files.store import Change, Store

    agent = script("import time; time.sleep(60)")
    herd.write(f"""
        [[session]]
        name = "api"
        command = {agent}
        autostart = false
        restart = "on-failure"
        restart_delay = 0
    """)
    state = herd.root / ".herd"
    prepare_state_dir(state)
    store = Store(state / "state.db")
    now = iso(utc_now())
    run = RunRecord(
        session="api",
        run=1,
        handle="api/1",
        argv=["agent"],
        started_at=now,
        ended_at=now,
        exit_code=3,
        outcome="exit 3",
    )
    store.commit(
        Change(
            session=SessionRecord(
                name="api", state=State.RUNNING, handle="api/1", run=1, task_started_at=now
            ),
            task=TaskRecord(handle="api/1", session="api", first_run=1, started_at=now),
            run=run,
        )
    )
    store.close()
    herd.start()
    wait_until(lambda: herd.status("api")["run"] == 2 or herd.status("api")["state"] == "failed")
    status = herd.wait_state("api", "running", "failed", timeout_s=30)
    assert status["state"] == "running" and status["run"] == 2, status
    assert status["handle"] == "api/1"
    ended = herd.events("api", "run-ended")
    assert [e["run"] for e in herd.events("api", "run-started")] == [2], ended


@pytest.mark.pidns
@pytest.mark.timeout(60)
def test_a_daemon_stopped_by_sigterm_leaves_its_agents_whole_for_the_next(tmp_path: Path) -> None:
    """SIGTERM stops the daemon and leaves the agents running (its documented way out): each
    run's wrapper and agent live on and the next daemon re-adopts run 1. asyncio used to
    SIGKILL every wrapper as the daemon's process objects were collected on exit, so the next
    daemon found the runs ended, exit unknown, and restarted them as crashes."""
    agent = script("import time; print('up', flush=True); time.sleep(60)")
    (tmp_path / "herd.toml").write_text(f'[[session]]\nname = "a"\ncommand = {agent}\n')
    assert run_herd(tmp_path, "up", "--no-tui").returncode == 0
    try:
        running = wait_until(
            lambda: (
                (s := json.loads(run_herd(tmp_path, "status", "a", "--json").stdout))["state"]
                == "running"
                and s
            )
        )
        wrapper = psutil.Process(running["pid"])
        daemon_pid = int((tmp_path / ".herd" / "daemon.lock").read_text())
        os.kill(daemon_pid, signal.SIGTERM)
        wait_until(lambda: pid_gone(daemon_pid))
        assert wrapper.is_running() and wrapper.status() != psutil.STATUS_ZOMBIE
        assert run_herd(tmp_path, "up", "--no-tui").returncode == 0
        wait_until(lambda: [e for e in events_of(tmp_path) if e["kind"] == "adopted"])
        status = json.loads(run_herd(tmp_path, "status", "a", "--json").stdout)
        assert (status["state"], status["run"], status["restarts"]) == ("running", 1, 0), status
        assert not [
            e for e in events_of(tmp_path) if e["kind"] in ("run-exited", "restart-scheduled")
        ]
    finally:
        run_herd(tmp_path, "down")


@pytest.mark.anyio
@pytest.mark.parametrize("restart_said_it", [False, True])
async def test_the_first_look_at_a_plain_folder_says_not_a_git_repo_unless_a_restart_did(
    tmp_path: Path, restart_said_it: bool
) -> None:
    """Under load a run can crash, and its restart say "not a git repository", before the
    watch's first look at git: the look then says nothing more (the session says it once)."""
    posted: list[tuple[str, str]] = []
    ctx = SimpleNamespace(git_reads=anyio.CapacityLimiter(1), runs_changed=lambda: None)
    session = SimpleNamespace(
        config=SimpleNamespace(cwd=tmp_path),
        ctx=ctx,
        git_warned=restart_said_it,
        make_event=lambda kind, message, run=None, **data: (kind, message),
        commit_events=lambda *events: posted.extend(events),
        close_warning=lambda *args: None,
    )
    watch = CheckpointWatch(session, lambda sha: None)  # type: ignore[arg-type]
    await watch.refresh()
    assert watch.git_error is not None and "is not a git repository" in watch.git_error
    assert [kind for kind, _ in posted] == ([] if restart_said_it else ["not-a-git-repo"])
