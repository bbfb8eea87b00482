"""`herd send NAME TEXT` gives a headless session its next prompt (the resume's `{message}`),
used once, kept across a daemon restart; `herd wait NAME --until STATE` waits for a state.

The simulated agent echoes the prompt it was given (`--prompt`) as a user line of its output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import SIMAGENT, Herd, sim_repo, wait_until

from agentherd.sessions.states import WAIT_TIMEOUT_EXIT, WAIT_UNREACHABLE_EXIT


def block(repo: Path, *options: str, resume_prompt: bool = True, restart: str = "never") -> str:
    """A session `main` of the simulated agent; its resume gives `{message}` as the prompt."""
    command = [*SIMAGENT, "--one-per-run", "--delay", "0", *options]
    resume = [*SIMAGENT, "--one-per-run", "--delay", "0", "--resume", "{session_id}"]
    if resume_prompt:
        resume += ["--prompt", "{message}"]
    return f"""
        [[session]]
        name = "main"
        cwd = "{repo}"
        agent = "claude"
        command = {json.dumps(command)}
        resume = {json.dumps(resume)}
        autostart = false
        restart = "{restart}"
        restart_delay = 0
        stop_grace = "2s"
        """


def prompt_of(herd: Herd, run: int) -> str | None:
    """The prompt run `run` printed it was given (the simulated agent's user line)."""
    assert herd.daemon is not None
    log = herd.root / ".herd" / "runs" / "main" / str(run) / "output.log"
    if not log.exists():
        return None
    for line in log.read_text().splitlines():
        obj = json.loads(line) if line.startswith("{") else {}
        content = obj.get("message", {}).get("content") if obj.get("type") == "user" else None
        if isinstance(content, str):  # a prompt, not a tool's result
            return content
    return None


def ended_task(herd: Herd) -> dict[str, Any]:
    return herd.wait_state("main", "completed", "failed")


def test_a_message_to_an_ended_session_resumes_its_conversation_at_once(
    herd: Herd, tmp_path: Path
) -> None:
    herd.write(block(sim_repo(tmp_path / "repo")))
    herd.start()
    herd.client.call("start", name="main")
    first = ended_task(herd)
    done = herd.cli("send", "main", "Now write the docs, please.", "--wait")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("main: started run 2 (main/2) with the message; run 2 ended ")
    started = herd.events("main", "run-started")
    assert [e["data"]["mode"] for e in started] == ["command", "resume"]
    assert "Now write the docs, please." in started[-1]["data"]["argv"]
    assert prompt_of(herd, 2) == "Now write the docs, please."
    runs = herd.daemon.store.runs("main")  # type: ignore[union-attr]
    assert runs[-1].agent_session_id == first["agent_session_id"]  # the same conversation
    (queued,) = herd.events("main", "message-queued")
    (delivered,) = herd.events("main", "message-delivered")
    assert queued["data"]["origin"] == delivered["data"]["origin"] == "person"
    assert delivered["run"] == 2 and delivered["data"]["message_id"] == queued["data"]["message_id"]
    again = herd.cli("send", "main", "And the changelog.", "--json", "--wait")
    assert json.loads(again.stdout)["run"] == 3  # used once: the next text needs its own run


def test_a_message_while_a_run_works_waits_for_the_next_run_across_a_daemon_restart(
    herd: Herd, tmp_path: Path
) -> None:
    gate = tmp_path / "go"
    herd.write(block(sim_repo(tmp_path / "repo"), "--wait-at", f"1:{gate}"))
    herd.start()
    herd.client.call("start", name="main")
    herd.wait_state("main", "running")
    wait_until(lambda: herd.status("main")["agent_session_id"], what="the session id")
    queued = herd.cli("send", "main", "Also update the changelog.")
    assert queued.returncode == 0, queued.stderr
    assert (
        queued.stdout == "main: queued for the next run, which starts when the current one ends\n"
    )
    assert not herd.events("main", "message-delivered")
    herd.stop_daemon()  # the message is in the store, not only in this daemon
    herd.start()
    waiting = herd.status("main")["message_waiting"]
    assert (waiting["origin"], waiting["chars"]) == ("person", len("Also update the changelog."))
    shown = "message:       26 characters from person wait for the next run"
    assert shown in herd.cli("status", "main").stdout
    gate.touch()
    # restart = never and a clean end: the task would be over, but the message starts a run.
    wait_until(lambda: prompt_of(herd, 2), what="run 2's prompt")
    assert prompt_of(herd, 2) == "Also update the changelog."
    assert prompt_of(herd, 1) is None  # run 1 was not given it
    assert ended_task(herd)["message_waiting"] is None
    assert len(herd.events("main", "message-delivered")) == 1  # used once
    assert [e["data"]["mode"] for e in herd.events("main", "run-started")] == ["command", "resume"]


def test_a_stop_drops_a_waiting_message_and_says_so(herd: Herd, tmp_path: Path) -> None:
    gate = tmp_path / "go"
    herd.write(block(sim_repo(tmp_path / "repo"), "--wait-at", f"1:{gate}"))
    herd.start()
    herd.client.call("start", name="main")
    herd.wait_state("main", "running")
    assert herd.cli("send", "main", "never mind").returncode == 0
    assert herd.cli("stop", "main").returncode == 0
    (dropped,) = herd.events("main", "message-dropped")
    assert "the task was stopped" in dropped["message"]
    assert len(herd.events("main", "run-started")) == 1


def test_send_refuses_a_session_that_cannot_take_a_message(herd: Herd, tmp_path: Path) -> None:
    herd.write(block(sim_repo(tmp_path / "repo"), resume_prompt=False))
    herd.start()
    done = herd.cli("send", "main", "hello")
    assert done.returncode == 2
    assert done.stderr.startswith("herd: main cannot take a message: its resume has no {message}")
    herd.write(block(sim_repo(tmp_path / "repo2")))
    assert herd.client.call("reload")
    never = herd.cli("send", "main", "hello")
    assert never.returncode == 2
    assert "main has no conversation to resume yet" in never.stderr
    assert "`herd start main` first" in never.stderr
    # An interactive session's text is typed into its interface: with none running, nothing
    # is queued for a print-mode `resume` (its interface would not be the one that answers).
    herd.write(block(sim_repo(tmp_path / "repo3")) + "interactive = true\n")
    assert herd.client.call("reload")
    closed = herd.cli("send", "main", "hello")
    assert closed.returncode == 2
    assert "main's interface is not running" in closed.stderr
    assert "`herd start main` opens it" in closed.stderr


def test_wait_until_a_state_reached_timed_out_unreachable_and_bad(
    herd: Herd, tmp_path: Path
) -> None:
    gate = tmp_path / "go"
    herd.write(block(sim_repo(tmp_path / "repo"), "--wait-at", f"1:{gate}"))
    herd.start()
    bad = herd.cli("wait", "main", "--until", "runing")
    assert bad.returncode == 2
    assert bad.stderr.startswith("herd: wait --until: 'runing' is not a state; states: idle, ")
    herd.client.call("start", name="main")
    reached = herd.cli("wait", "main", "--until", "paused,running")
    assert (reached.returncode, reached.stdout) == (0, "main/1: running\n")
    late = herd.cli("wait", "main", "--until", "completed,failed", "--timeout", "0.2")
    assert late.returncode == WAIT_TIMEOUT_EXIT
    assert late.stderr == "main/1: still running after 0.2s\n"
    gate.touch()
    ended = ended_task(herd)
    never = herd.cli("wait", "main", "--until", "running")
    assert never.returncode == WAIT_UNREACHABLE_EXIT
    assert never.stderr.startswith(f"main/1: {ended['state']}")
    assert "it will not be running without a start (`herd start main`)" in never.stderr
    assert herd.cli("wait", "main", "--until", ended["state"]).returncode == 0
