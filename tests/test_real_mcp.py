"""The pinned Claude Code as an orchestrator: it drives a worker through `herd mcp`.

Its scripted model calls herd_start, herd_wait and herd_report; the worker (the simulated
agent) commits its plan's features; the orchestrator's final answer quotes the report it read.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import HERD, SIMAGENT, Herd, git, sim_repo
from model_servers import AnthropicServer, Step, text, tool
from realagents import AGENT_WAIT_S, claude_env

pytestmark = [pytest.mark.realagents, pytest.mark.timeout(180)]

MCP_START_WAIT_S = 60.0
"""How long Claude Code waits for `herd mcp` to connect (a cold Python start and the SDK's
imports, under load)."""

QUOTE = "{report}"
"""A final text step with this in it says the last tool result (the report) instead."""


class QuotingServer(AnthropicServer):
    """The model quotes what its last tool call returned, as a model would."""

    def next_step(self, body: dict[str, Any]) -> Step:
        step = super().next_step(body)
        if step.kind != "text" or QUOTE not in step.text:
            return step
        return text(step.text.replace(QUOTE, last_tool_result(body)))


def last_tool_result(body: dict[str, Any]) -> str:
    """The text of the newest tool_result block of the conversation."""
    for message in reversed(body.get("messages") or []):
        content = message.get("content")
        for block in reversed(content if isinstance(content, list) else []):
            if block.get("type") == "tool_result":
                inner = block.get("content")
                if isinstance(inner, list):
                    return " ".join(b.get("text", "") for b in inner if isinstance(b, dict))
                return str(inner)
    return "(no tool result)"


def test_claude_code_starts_a_worker_waits_and_quotes_its_report(
    herd: Herd, tmp_path: Path, claude: str
) -> None:
    repo = sim_repo(tmp_path / "repo", features=2)
    herd.write(
        f"""
        [[session]]
        name = "worker"
        cwd = "{repo}"
        command = {json.dumps([*SIMAGENT, "--delay", "0"])}
        restart = "never"
        plan = "feature_list.json"
        progress = "claude-progress.txt"
        """
    )
    herd.start()
    mcp_config = tmp_path / "herd-mcp.json"
    mcp_config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "herd": {"command": HERD, "args": ["-c", str(herd.config_path), "mcp"]}
                }
            }
        )
    )
    script = [
        tool("mcp__herd__herd_start", session="worker"),
        tool("mcp__herd__herd_wait", target="worker/1", timeout_s=40),
        tool("mcp__herd__herd_report", session="worker"),
        text(f"The worker is done. Its report: {QUOTE}"),
    ]
    with QuotingServer(script) as server:
        env = claude_env(tmp_path / "home", server.url, claude)
        # `claude -p` connects --mcp-config servers in the background: a first turn before
        # herd mcp is up (a cold Python start, seconds under load) finds no herd tools
        # ("still connecting"). Told so, it waits for them: up to MCP_CONNECT_TIMEOUT_MS
        # (5 s by default, which a loaded CI passed: the CLI's own code reads that variable)
        # with MCP_TIMEOUT the bound of each server's start.
        env["MCP_CONNECTION_NONBLOCKING"] = "false"
        env["MCP_CONNECT_TIMEOUT_MS"] = str(int(MCP_START_WAIT_S * 1000))
        env["MCP_TIMEOUT"] = str(int(MCP_START_WAIT_S * 1000))
        done = subprocess.run(
            [
                claude,
                "-p",
                "Run the worker session through herd, wait for it, and tell me its report.",
                "--mcp-config",
                str(mcp_config),
                "--allowedTools",
                "mcp__herd__*",
                "--output-format",
                "json",
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=AGENT_WAIT_S,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert not server.steps, f"the model's script was not used up: {server.steps}"
    answer = json.loads(done.stdout)["result"].replace("\\n", "\n")
    # The worker's commits are there, and its task completed.
    subjects = git(repo, "log", "--format=%s").splitlines()
    assert [s for s in subjects if s.startswith("Implement Feature")] == [
        "Implement Feature 2: User can mark a todo as completed - verified",
        "Implement Feature 1: User can add a todo by typing text and pressing Enter - verified",
    ], answer
    assert herd.status("worker")["state"] == "completed"
    # The answer quotes the report herd made: its headline and its summary line.
    markdown = herd.client.call("report", name="worker")["markdown"]
    headline = markdown.splitlines()[0]
    summary = next(line for line in markdown.splitlines() if "plan items pass;" in line)
    assert headline == "# herd report: worker — completed · `worker/1`", headline
    assert headline in answer and summary.startswith("2/2 plan items pass")
    assert summary.split(" — ")[0].split(";")[0] in answer, (summary, answer)
    tools = [e["data"]["tool"] for e in herd.events(kind="mcp-call")]
    assert tools == ["herd_start", "herd_wait", "herd_report"]
