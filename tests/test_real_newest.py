"""The newest release of each agent CLI (tests/install_newest_agents.sh puts it in
.cache/agents-newest): a stream whose lines changed shape fails here, naming the new fields.

Marked `newest`: deselected by default and outside .ci/run (`-m newest` runs it). The other
real-agent tests run against the newest releases with
`HERD_AGENTS_BIN=.cache/agents-newest/node_modules/.bin`; docs/reference.md records which
versions passed.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import make_repo
from model_servers import AnthropicServer, text, tool
from realagents import ROOT, claude_env

pytestmark = [pytest.mark.newest, pytest.mark.realagents, pytest.mark.timeout(180)]

NEWEST_BIN = Path(
    os.environ.get("HERD_NEWEST_AGENTS_BIN") or ROOT / ".cache/agents-newest/node_modules/.bin"
)

CLAUDE_RESULT_FIELDS = frozenset(
    [
        "api_error_status",
        "duration_api_ms",
        "duration_ms",
        "fast_mode_state",
        "is_error",
        "modelUsage",
        "num_turns",
        "permission_denials",
        "result",
        "session_id",
        "stop_reason",
        "subtype",
        "terminal_reason",
        "time_to_request_ms",
        "total_cost_usd",
        "ttft_ms",
        "ttft_stream_ms",
        "type",
        "usage",
        "uuid",
        "errors",
        "structured_output",
        "deferred_tool_use",
        "origin",
        # 2.1.332: herd sums model_usage_since_last_result and num_turns over a process's
        # results (result_index counts them; origin names a background task's report); the
        # rest say nothing herd counts.
        "model_usage_since_last_result",
        "result_index",
        "subagent_stats",
        "queued_turn_count",
        "safety_stops",
        "first_content_frame_ms",
        "fast_mode_disabled_reason",
    ]
)
"""The result line's fields herd was checked against (Claude Code 2.1.197 and 2.1.332)."""


def test_claudes_result_line_has_no_field_herd_was_not_checked_against(tmp_path: Path) -> None:
    binary = NEWEST_BIN / "claude"
    if not binary.exists():
        pytest.skip(f"no newest claude in {NEWEST_BIN}: run tests/install_newest_agents.sh")
    repo = make_repo(tmp_path / "repo")
    steps = [tool("Write", file_path=str(repo / "a.txt"), content="a\n"), text("Done.")]
    with AnthropicServer(steps) as server:
        env = claude_env(tmp_path / "home", server.url, str(binary))
        argv = [str(binary), "-p", "go", "--output-format", "stream-json", "--verbose"]
        argv += ["--allowedTools", "Write"]
        done = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, timeout=120)
    results = [json.loads(x) for x in done.stdout.splitlines() if '"type":"result"' in x]
    assert results, done.stderr[-2000:]
    new = sorted(set(results[-1]) - CLAUDE_RESULT_FIELDS)
    assert not new, f"Claude Code's result line has fields herd was not checked against: {new}"
