"""The approval gate outlasting a real agent's API stream (issue 12, item 4).

The agent removes an item from its plan while its next request to the model is in flight;
`on_drift = { plan-tampered = "pause" }` stops the run there, and while it is stopped the
server closes that stream unfinished (a stream that timed out). Then a person answers.

To make "stopped while the request is in flight" certain rather than a race between herd's
stop and the agent's next request, the plan edit is done by a background command the agent
left running: it waits for the server to hold the request, then edits the plan.

Seen with the pinned CLIs: Claude Code sends the cut turn again, not streamed, and carries on
(it dies only when that fails too); Codex with `stream_max_retries = 0` dies (by default it
reconnects); Gemini CLI takes the cut stream for an empty answer and exits 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Herd, git, make_repo, wait_until
from model_servers import (
    AnthropicServer,
    GeminiServer,
    OpenAIResponsesServer,
    ScriptedServer,
    Step,
    drop,
    text,
    tool,
)
from realagents import (
    AGENT_WAIT_S,
    agent_binary,
    claude_env,
    codex_env,
    gemini_env,
    result_lines,
    session_toml,
)

pytestmark = [pytest.mark.realagents, pytest.mark.timeout(180)]

PLAN = [
    {"id": "greet", "description": "write hello.txt", "passes": False},
    {"id": "docs", "description": "document the greeting", "passes": False},
]
PLAN_FILE = "feature_list.json"
TAMPERED = PLAN[:1]
"""The agent drops the item it does not feel like doing: plan-tampered."""

MARK_DONE = (
    "python3 -c \"import json; p = json.load(open('feature_list.json')); "
    "[i.update(passes=True) for i in p]; json.dump(p, open('feature_list.json', 'w'), indent=1)\""
)
"""The agent marks every item of the plan as it finds it (after approve: one; reject: two)."""
COMMIT = "git add -A && git commit -q -m 'agent: greet'"


def _repo(tmp_path: Path) -> Path:
    plan = json.dumps(PLAN, indent=1) + "\n"
    return make_repo(tmp_path / "repo", {PLAN_FILE: plan, "README.md": "hi\n"})


def _script(repo: Path, tmp_path: Path, flag: Path, fallback_fails: bool) -> list[Step]:
    """Edit the plan in the background once the next request is held; then the work."""
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(TAMPERED, indent=1) + "\n")
    editor = (
        f"until [ -e {flag} ]; do sleep 0.05; done; "
        f"cp {tampered} plan.tmp && mv plan.tmp feature_list.json"
    )
    # Claude Code answers a broken stream with one non-streaming request of the same turn;
    # a second `drop` makes that one fail too: the API still unreachable when it continues.
    after_gate = [drop(), drop()] if fallback_fails else [drop()]
    return [
        tool("Bash", command=f"( {editor} ) >/dev/null 2>&1 &", description="tidy the plan"),
        *after_gate,
        tool("Write", file_path=str(repo / "hello.txt"), content="hello\n"),
        tool("Bash", command=f"{MARK_DONE} && {COMMIT}", description="mark done and commit"),
        text("Done: hello.txt committed."),
    ]


def _gate(
    herd: Herd, server: ScriptedServer, env: dict[str, str], repo: Path, agent: str = "claude"
) -> None:
    """Start the session and hold it at the gate until the server has dropped its stream."""
    herd.write(
        session_toml(
            "main",
            agent,
            repo,
            env,
            plan=PLAN_FILE,
            restart="on-failure",
            on_drift={"plan-tampered": "pause"},
            stop_grace="2s",
        )
    )
    herd.start()
    herd.client.call("start", name="main")
    try:
        waiting = herd.wait_state("main", "waiting-approval", "failed", timeout_s=AGENT_WAIT_S)
    except AssertionError:  # once in CI under load (codex): say where it stood
        log = herd.root / ".herd" / "runs" / "main" / "1" / "output.log"
        print(herd.status("main"), herd.events("main"), len(server.requests), server.hanging)
        print(log.read_text(errors="replace")[-3000:] if log.exists() else "no log")
        raise
    assert (waiting["state"], waiting["reason"]) == ("waiting-approval", "plan-tampered"), waiting
    assert server.hanging.is_set(), "the run was stopped while its request was in flight"
    server.drop_held()  # the stream "times out" while the agent is stopped
    wait_until(server.dropped.is_set, what="the server to drop the held stream")


STORY = {
    "run-started",
    "plan-tampered",
    "waiting-approval",
    "plan-approved",
    "plan-rejected",
    "approved",
    "rejected",
    "run-exited",
    "rescue-saved",
    "worktree-reset",
    "plan-kept",
    "completed",
    "failed",
}
"""The events that tell what happened at and after the gate."""


def _story(herd: Herd) -> list[str]:
    return [e["kind"] for e in herd.events("main") if e["kind"] in STORY]


@pytest.mark.pidns
@pytest.mark.parametrize("answer", ["approve", "reject"])
@pytest.mark.parametrize("api_back", [True, False], ids=["api-back", "api-still-down"])
def test_a_stream_dropped_at_the_gate_ends_completed_on_the_answered_plan(
    herd: Herd, tmp_path: Path, claude: str, answer: str, api_back: bool
) -> None:
    repo = _repo(tmp_path)
    flag = tmp_path / "held"
    with AnthropicServer(_script(repo, tmp_path, flag, fallback_fails=not api_back)) as server:
        server.held_flag = flag
        _gate(herd, server, claude_env(tmp_path / "home", server.url, claude), repo)
        answered = herd.cli(answer, "main")
        assert answered.returncode == 0, answered.stderr

        # A second gate for the same change would be a hang: the person answered already.
        status = herd.wait_state(
            "main", "completed", "failed", "waiting-approval", timeout_s=AGENT_WAIT_S
        )
        story = _story(herd)
        assert status["state"] == "completed", (status["reason"], story)
        # Claude Code's own answer to a broken stream: the same turn again, not streamed.
        assert [bool(r.get("stream")) for r in server.requests[:3]] == [True, True, False]
        settled = (
            ["plan-approved", "approved"] if answer == "approve" else ["plan-rejected", "rejected"]
        )
        gate = ["run-started", "plan-tampered", "waiting-approval", *settled, "run-exited"]
        exits = [e["data"] for e in herd.events("main", "run-exited")]
        started = herd.events("main", "run-started")
        if api_back:
            # It retried and carried on in the same run: nothing crashed, nothing was reset.
            assert story == [*gate, "completed"]
            assert [(x["exit_code"], x["outcome"]) for x in exits] == [(0, "success")]
        else:
            # The retry failed too: exit 1, an ordinary crash; restart = "on-failure" resumed
            # the same conversation from the checkpoint, on the plan the person answered with.
            kept = ["plan-kept"] if answer == "approve" else []
            restart = ["rescue-saved", "worktree-reset", *kept, "run-started", "run-exited"]
            assert story == [*gate, *restart, "completed"]
            assert [(x["exit_code"], x["outcome"]) for x in exits] == [
                (1, "agent-error"),
                (0, "success"),
            ]
            (died,) = result_lines(herd.root / ".herd" / "runs" / "main" / "1" / "output.log")
            assert died["is_error"] and "ECONNRESET" in died["result"]
            assert [e["data"]["mode"] for e in started] == ["command", "resume"]
            assert died["session_id"] in started[1]["data"]["argv"]
            assert status["agent_session_id"] == died["session_id"]
            resumed = repr(server.requests[3]["messages"])
            assert "tidy the plan" in resumed and "tool_result" in resumed
        assert herd.events("main", "stalled") == []
        # The plan as the person answered: one item after approve, both after reject; all pass.
        items = 1 if answer == "approve" else 2
        assert status["plan"] == {"passing": items, "total": items, "changed_items": []}
        committed = json.loads(git(repo, "show", "HEAD:feature_list.json"))
        assert [i["id"] for i in committed] == ["greet", "docs"][:items]
        assert git(repo, "show", "HEAD:hello.txt") == "hello\n"
        assert git(repo, "log", "-1", "--format=%s").strip() == "agent: greet"
        assert status["warnings"] == []


@pytest.mark.pidns
@pytest.mark.parametrize("agent", ["codex", "gemini"])
def test_codex_dies_and_resumes_and_gemini_exits_early_after_the_gate(
    herd: Herd, tmp_path: Path, agent: str
) -> None:
    """What the README says of the other CLIs, with their retries off (the API still down)."""
    binary = agent_binary(agent)
    repo = _repo(tmp_path)
    flag = tmp_path / "held"
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(TAMPERED, indent=1) + "\n")
    editor = (
        f"until [ -e {flag} ]; do sleep 0.05; done; cp {tampered} p.tmp && mv p.tmp {PLAN_FILE}"
    )
    work = f"printf 'hello\\n' > hello.txt && {MARK_DONE} && {COMMIT}"
    server_type: type[ScriptedServer]
    if agent == "codex":  # its exec_command ends the command's group: setsid outlives it
        server_type, shell, key = OpenAIResponsesServer, "exec_command", "cmd"
    else:
        server_type, shell, key = GeminiServer, "run_shell_command", "command"
    steps = [
        tool(shell, **{key: f"setsid sh -c '{editor}' >/dev/null 2>&1 &"}),
        drop(),
        tool(shell, **{key: work}),
        text("Done."),
    ]
    with server_type(steps) as server:
        server.held_flag = flag
        env: dict[str, str]
        if agent == "codex":
            env = codex_env(tmp_path / "home", server.url, binary)
        else:
            settings = {"general": {"maxAttempts": 1}}
            env = gemini_env(tmp_path / "home", server.url, binary, settings)
            env["GEMINI_CLI_TRUST_WORKSPACE"] = "true"
        _gate(herd, server, env, repo, agent)
        approved = herd.cli("approve", "main")
        assert approved.returncode == 0, approved.stderr
        status = herd.wait_state(
            "main", "completed", "failed", "waiting-approval", timeout_s=AGENT_WAIT_S
        )
        story = _story(herd)
        gate = ["run-started", "plan-tampered", "waiting-approval", "plan-approved", "approved"]
        exits = [
            (e["data"]["exit_code"], e["data"]["outcome"])
            for e in herd.events("main", "run-exited")
        ]
        if agent == "codex":
            # `stream disconnected before completion`, exit 1: a crash, resumed in run 2.
            assert status["state"] == "completed", (status["reason"], story)
            assert story == [
                *gate,
                "run-exited",
                "rescue-saved",
                "worktree-reset",
                "plan-kept",
                "run-started",
                "run-exited",
                "completed",
            ]
            assert exits == [(1, "agent-error"), (0, "success")]
            started = herd.events("main", "run-started")
            assert [e["data"]["mode"] for e in started] == ["command", "resume"]
            assert git(repo, "log", "-1", "--format=%s").strip() == "agent: greet"
            assert status["plan"] == {"passing": 1, "total": 1, "changed_items": []}
        else:
            # Gemini CLI took the cut stream for an empty answer: exit 0 with the plan not done.
            assert story == [*gate, "run-exited", "failed"]
            assert (status["state"], status["reason"]) == ("failed", "plan-incomplete")
            assert exits == [(0, "success")]
            assert herd.events("main", "early-exit")
            assert [i["id"] for i in json.loads((repo / PLAN_FILE).read_text())] == ["greet"]
