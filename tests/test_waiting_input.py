"""`waiting-input`: an interactive run's agent says by its own hooks that it waits for a
person, and herd shows it (state, task_state, events, `wait --until`) and leaves it when the
agent works again; `herd send` types into the run's terminal and `--wait` waits for the turn.

The agent here is a small program that appends hook lines as Claude Code's hooks would, to
`$HERD_SIGNALS` (the real CLIs are in tests/test_real_waiting_input.py).
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import PY, Herd, wait_until

from agentherd.supervisor.process import ptyholder
from agentherd.supervisor.session import inputwait

AGENT = r"""
import json, os, sys, termios
attrs = termios.tcgetattr(0)
attrs[3] &= ~termios.ECHO
termios.tcsetattr(0, termios.TCSANOW, attrs)

def hook(event, **fields):
    with open(os.environ["HERD_SIGNALS"], "a") as signals:
        signals.write(json.dumps({"hook_event_name": event, **fields}) + "\n")

print("READY", flush=True)
hook("Stop")
for n, line in enumerate(sys.stdin, 1):
    words = line.strip()
    if words == "1":  # the answer to a subagent's dialog, not a prompt
        hook("PostToolUse", tool_name="Bash", agent_id="sub-1")
        print("SUBAGENT RAN", flush=True)
        hook("Stop")
        continue
    hook("UserPromptSubmit", prompt=words)
    if words == "ask":
        print("Do you want to proceed?", flush=True)
        hook("PermissionRequest", tool_name="Bash")
        continue
    if words == "delegate":
        print("Do you want to proceed? (its subagent asks)", flush=True)
        # The subagent asks as its main thread's own hook fires: two hooks appending at once
        # leave both objects on one line (each writes its JSON, then its newline).
        asks = {"hook_event_name": "PermissionRequest", "tool_name": "Bash",
                "agent_id": "sub-1", "agent_type": "worker"}
        main = {"hook_event_name": "PreToolUse", "tool_name": "wait_agent"}
        with open(os.environ["HERD_SIGNALS"], "a") as signals:
            signals.write(json.dumps(asks) + json.dumps(main) + "\n\n")
        continue
    print(f"ANSWER {n}: {words}", flush=True)
    hook("Stop")
"""


QUIET = "import time; print('starting', flush=True); time.sleep(600)"
"""An agent that says one line and then nothing (not waiting for anyone: a stall)."""

RECORDER = "import sys; open(sys.argv[1], 'a').write(' '.join(sys.argv[2:]) + chr(10))"
"""A notify command that appends its arguments to a file."""


def write(herd: Herd, root: Path) -> None:
    (root / "agent.py").write_text(AGENT)
    (root / "quiet").mkdir()
    notify = json.dumps([PY, "-c", RECORDER, str(root / "notified"), "{session}", "{kind}"])
    herd.write(f"""
        notify = {notify}

        [[session]]
        name = "t"
        command = {json.dumps([PY, str(root / "agent.py")])}
        interactive = true
        restart = "never"
        stop_grace = "2s"
        budget = {{ stall = "1s" }}

        [[session]]
        name = "quiet"
        cwd = "{root / "quiet"}"
        command = {json.dumps([PY, "-c", QUIET])}
        restart = "never"
        stop_grace = "2s"
        budget = {{ stall = "1s" }}
        """)


def signals_of(herd: Herd, kind: str) -> list[str]:
    return [e["data"]["signal"] for e in herd.events("t", kind)]


def test_an_interactive_agent_waiting_for_a_person_is_waiting_input_and_send_moves_it_on(
    herd: Herd, tmp_path: Path
) -> None:
    write(herd, tmp_path)
    client = herd.start()
    client.call("start", name="t")
    client.call("start", name="quiet")
    # Its answer finished at an idle prompt: it waits for a person.
    status = herd.wait_state("t", "waiting-input", timeout_s=30)
    assert status["task_state"] == "input_required"
    assert signals_of(herd, "waiting-input") == ["Stop"]
    until = herd.cli("wait", "t", "--until", "waiting-input", "--timeout", "5")
    assert until.returncode == 0, until.stderr
    # notify's defaults have it: a person hears that the agent waits for them.
    notified = tmp_path / "notified"
    wait_until(lambda: notified.exists() and "t waiting-input" in notified.read_text())

    sent = herd.cli("send", "t", "hello there", "--wait", "--timeout", "30", "--json")
    assert sent.returncode == 0, sent.stderr
    reply = json.loads(sent.stdout)
    assert reply["outcome"] == "typed" and reply["run"] == 1
    assert reply["run_outcome"] == "turn-ended" and reply["state"] == "waiting-input"
    assert "ANSWER 1: hello there" in herd.cli("logs", "t", "--raw").stdout
    # It worked again on the prompt, then waited again; the log says who typed.
    assert signals_of(herd, "working") == ["UserPromptSubmit"]
    assert signals_of(herd, "waiting-input") == ["Stop", "Stop"]
    typed = herd.events("t", "message-typed")
    assert typed[0]["data"]["origin"] == "person" and typed[0]["data"]["chars"] == 11

    # A new daemon keeps the state, and the next turn is seen as before.
    herd.stop_daemon()
    herd.start()
    assert herd.status("t")["state"] == "waiting-input"
    again = json.loads(herd.cli("send", "t", "more", "--wait", "--timeout", "30", "--json").stdout)
    assert again["run_outcome"] == "turn-ended" and again["state"] == "waiting-input"
    assert signals_of(herd, "waiting-input") == ["Stop", "Stop", "Stop"]

    # A permission prompt waits for a person too.
    herd.cli("send", "t", "ask")
    wait_until(lambda: signals_of(herd, "waiting-input")[-1:] == ["PermissionRequest"])
    assert herd.status("t")["state"] == "waiting-input"

    # Silence while it waits for a person is no stall; a silent running session's is.
    def stalled(name: str) -> bool:
        return any(w["kind"] == "stalled" for w in herd.status(name)["warnings"])

    wait_until(lambda: stalled("quiet"), what="the quiet session's stall")
    assert not stalled("t")
    assert not herd.events("t", "stalled")

    # A person may pause it there (resumed, it is running until its hooks say more) or stop it.
    client = herd.client
    client.call("pause", name="t")
    assert herd.status("t")["state"] == "paused"
    client.call("resume", name="t")
    assert herd.status("t")["state"] == "running"
    client.call("send", name="t", text="ask")
    herd.wait_state("t", "waiting-input")
    client.call("stop", name="t", socket_timeout_s=None)
    assert herd.wait_state("t", "stopped")["reason"] == "user"


def test_a_subagents_dialog_waits_until_the_subagent_works_again(
    herd: Herd, tmp_path: Path
) -> None:
    """A subagent's permission prompt (its hook names the subagent by `agent_id`) waits for a
    person, and its main thread's hook that fired beside it (on the same line of the signals
    file) does not end the wait: the subagent's own next hook does."""
    write(herd, tmp_path)
    herd.start().call("start", name="t")
    herd.wait_state("t", "waiting-input", timeout_s=30)
    sent = herd.cli("send", "t", "delegate", "--wait", "--timeout", "30", "--json")
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout)["state"] == "waiting-input"
    [asked] = herd.events("t", "waiting-input")[1:]
    assert asked["data"]["signal"] == "PermissionRequest"
    assert asked["message"].startswith("a permission prompt of its worker subagent waits")
    answered = json.loads(herd.cli("send", "t", "1", "--wait", "--timeout", "30", "--json").stdout)
    assert answered["run_outcome"] == "turn-ended" and answered["state"] == "waiting-input"
    assert "SUBAGENT RAN" in herd.cli("logs", "t", "--raw").stdout
    assert signals_of(herd, "working") == ["UserPromptSubmit", "PostToolUse"]
    assert signals_of(herd, "waiting-input") == ["Stop", "PermissionRequest", "Stop"]


def test_the_signals_variable_is_the_one_the_terminal_holder_reads() -> None:
    assert inputwait.SIGNALS_VAR == ptyholder.SIGNALS_VAR
