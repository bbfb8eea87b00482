"""A cost budget stops a running real Claude Code session in time, against a scripted server.

Claude prints each answer with `output_tokens: 1` and the true count only in its final result
line; herd estimates the output from the printed content meanwhile, so a cost budget stops the
session at the answer that crossed it (or the next), not several answers later.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import FAST, Herd, make_repo, wait_until
from model_servers import AnthropicServer, Tokens, text, tool
from realagents import AGENT_WAIT_S, claude_env, session_toml, start_main

from agentherd.sessions.prices import estimate_cost_usd
from agentherd.supervisor.session.context import Timings

pytestmark = [pytest.mark.realagents, pytest.mark.timeout(180)]

TOKENS = Tokens(input=1000, output=1000, cache_read=0, cache_write=0)
"""What the first answer costs (answer k reports k more of each); its content is about 4
characters a token, as real output is."""

STEPS = 8
LIMIT_ANSWERS = 3.5
"""The cost limit in answers' worth: the 4th answer crosses it."""


@pytest.fixture
def budget_herd(tmp_path: Path) -> Herd:
    herd = Herd(tmp_path, Timings(**{**FAST.__dict__, "budget_check_s": 0.05}))
    yield herd  # type: ignore[misc]
    herd.down()


def _step(number: int) -> object:
    """A tool call whose input is about TOKENS.output tokens long, then a second's work."""
    filler = "x" * (TOKENS.output * 4 - 40)
    return tool("Bash", command=f"sleep 1 # step {number} {filler}", description="work")


@pytest.mark.pidns
def test_a_cost_budget_stops_a_running_claude_within_one_answer_of_the_limit(
    budget_herd: Herd, tmp_path: Path, claude: str
) -> None:
    herd = budget_herd
    repo = make_repo(tmp_path / "repo")
    steps = [_step(n) for n in range(1, STEPS + 1)]
    with AnthropicServer([*steps, text("All done.")], TOKENS) as server:
        model = "claude-sonnet-4-5"  # list price: $3 a million input tokens, $15 output
        env = {**claude_env(tmp_path / "home", server.url, claude), "ANTHROPIC_MODEL": model}
        per_answer = estimate_cost_usd(model, TOKENS.input, TOKENS.output, 0, 0)
        assert per_answer is not None
        limit = round(per_answer * LIMIT_ANSWERS, 6)
        start_main(herd, session_toml("main", "claude", repo, env, budget={"cost_usd": limit}))
        status = herd.wait_state("main", "stopped", "completed", "failed", timeout_s=AGENT_WAIT_S)
        assert status["state"] == "stopped", (status, herd.events("main"))
        assert status["reason"] == "budget:cost_usd"
        assert herd.events("main", "budget-stop")
        crossed = 4  # the first answer whose served total passed the limit

        def cost(bill: Tokens) -> float:
            usd = estimate_cost_usd(model, bill.input, bill.output, 0, 0)
            assert usd is not None
            return usd

        assert cost(server.bill(last=crossed - 1)) <= limit < cost(server.bill(last=crossed))
        assert crossed <= server.served <= crossed + 1, server.served
        served = server.served
        assert server.answered == served  # no side request: every answer is the conversation's
        # After the stop herd counts exactly what the server served (the transcript's figures).
        billed = server.bill()
        want = (billed.input, billed.output, served)

        def figures(usage: dict[str, Any]) -> tuple[int, int, int]:
            return (usage["input_tokens"], usage["output_tokens"], usage["turns"])

        def settled() -> dict[str, Any] | None:
            status = herd.status("main")
            usages = (status["usage"], status["usage_total"], status["fleet"]["usage_total"])
            return status if all(figures(u) == want for u in usages) else None

        status = wait_until(settled, timeout_s=30, what="the final figures in herd status")
        assert status["usage"]["cost_usd"] == pytest.approx(cost(billed))
        assert status["usage"]["cost_estimated"] is True  # herd's price table: no result line
        report = json.loads(herd.cli("report", "main", "--json").stdout)
        assert report["reason"] == "budget:cost_usd"
        assert figures(report["usage"]) == figures(report["usage_total"]) == want
        assert report["usage"]["cost_usd"] == pytest.approx(cost(billed))
