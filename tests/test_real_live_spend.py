"""Codex and Gemini CLI spend seen while their run lives, against scripted servers.

Neither CLI prints usage before its turn ends; each writes every answer's tokens to its own
files as it goes (Codex's rollout, Gemini's chats). herd reads those while the run lives: status
shows the spend so far, and a cost budget stops the run within seconds of the crossing, as it
does Claude. Gemini's turns are counted from what it prints. Every figure is checked against the
server's ledger.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import FAST, Herd, wait_until
from model_servers import (
    GeminiServer,
    OpenAIResponsesServer,
    ScriptedServer,
    Step,
    Tokens,
    text,
    tool,
)
from realagents import (
    AGENT_WAIT_S,
    MAIN,
    agent_binary,
    codex_env,
    gemini_env,
    repo_with_identity,
    served_as_read,
    session_toml,
    start_main,
)

from agentherd.sessions.adapters.usage import Usage
from agentherd.sessions.prices import lookup, price_table

pytestmark = [pytest.mark.realagents, pytest.mark.timeout(180)]

TOKENS = Tokens(input=1000, output=1000, cache_read=200, cache_write=0)
"""What the first answer reports (answer k reports k more of each)."""

STEPS = 12
LIMIT_ANSWERS = 4.5
"""The cost limit in answers' worth: the 5th answer crosses it; 1.5x the limit is 6.75 answers."""

GEMINI_MODEL = "gemini-2.5-flash"
"""Set, so Gemini CLI makes no routing request (its chat would not hold it)."""


@dataclass(frozen=True)
class Cli:
    """One agent CLI as these tests drive it."""

    name: str
    server: type[ScriptedServer]
    env: Callable[[Path, str, str], dict[str, str]]
    price: str
    """The session's `price`: what herd's estimate and these tests price the served tokens at."""
    shell: Callable[[str], Step]
    """The model runs this shell command."""


def _gemini_env(home: Path, url: str, binary: str) -> dict[str, str]:
    return {**gemini_env(home, url, binary), "GEMINI_MODEL": GEMINI_MODEL}


CODEX = Cli(
    "codex",
    OpenAIResponsesServer,
    codex_env,
    "gpt-5-codex",
    lambda command: tool("exec_command", cmd=command),
)
GEMINI = Cli(
    "gemini",
    GeminiServer,
    _gemini_env,
    GEMINI_MODEL,
    lambda command: tool("run_shell_command", command=command),
)
CLIS = [pytest.param(CODEX, id="codex"), pytest.param(GEMINI, id="gemini")]


@pytest.fixture
def live_herd(tmp_path: Path) -> Herd:
    # Looks at the agent's files five times a second: the stop lands in a step's work, not
    # while an answer the agent has not written down yet is in flight (a kill loses that one).
    timings = dataclasses.replace(FAST, budget_check_s=0.05, agent_files_poll_s=0.2)
    herd = Herd(tmp_path, timings)
    yield herd  # type: ignore[misc]
    herd.down()


def _cost(cli: Cli, bill: Tokens) -> float:
    price = lookup(cli.price, price_table({}))
    assert price is not None
    return price.cost_usd(Usage(*served_as_read(bill, True)))


def _figures(usage: dict[str, Any]) -> tuple[int, int, int, int]:
    return (
        usage["input_tokens"],
        usage["output_tokens"],
        usage["cache_read_tokens"],
        usage["cache_write_tokens"],
    )


def _start(herd: Herd, tmp_path: Path, cli: Cli, server: ScriptedServer, **keys: Any) -> None:
    repo = repo_with_identity(tmp_path / "repo")
    binary = agent_binary(cli.name)
    env = cli.env(tmp_path / "home", server.url, binary)
    start_main(herd, session_toml(MAIN, cli.name, repo, env, price=cli.price, **keys))


@pytest.mark.pidns
@pytest.mark.parametrize("cli", CLIS)
def test_status_shows_the_spend_while_the_run_lives_and_the_end_counts_it_once(
    live_herd: Herd, tmp_path: Path, cli: Cli
) -> None:
    herd = live_herd
    go_on = tmp_path / "go-on"
    wait = f"until [ -e {go_on} ]; do sleep 0.1; done"
    steps = [cli.shell("true # step 1"), cli.shell("true # step 2"), cli.shell(wait)]
    with cli.server([*steps, text("All done.")], TOKENS) as server:
        _start(herd, tmp_path, cli, server)
        wait_until(lambda: server.served == 3, AGENT_WAIT_S, "the third answer (it waits)")
        want = served_as_read(server.bill(), True)

        def live() -> dict[str, Any] | None:
            status = herd.status(MAIN)
            return status if _figures(status["usage"]) == want else None

        status = wait_until(live, 30, f"herd status to show the {want} served so far")
        assert status["state"] == "running" and status["usage"]["input_tokens"] > 0
        assert status["usage"]["cost_usd"] == pytest.approx(_cost(cli, server.bill()))
        assert status["usage"]["cost_estimated"] is True
        assert _figures(status["usage_total"]) == want
        assert server.served == 3  # the turn has not ended: all of it was read from files
        go_on.touch()
        # The run's own final figures replace what was read live: each answer counts once.
        status = herd.wait_state(MAIN, "completed", "failed", timeout_s=AGENT_WAIT_S)
        assert status["state"] == "completed", (status, herd.events(MAIN))
        assert server.served == 4
        want = served_as_read(server.bill(), True)
        assert _figures(status["usage"]) == _figures(status["usage_total"]) == want
        assert status["usage"]["cost_usd"] == pytest.approx(_cost(cli, server.bill()))


@pytest.mark.pidns
@pytest.mark.parametrize("cli", CLIS)
def test_a_cost_budget_stops_the_run_within_seconds_of_the_crossing(
    live_herd: Herd, tmp_path: Path, cli: Cli
) -> None:
    herd = live_herd
    steps = [cli.shell(f"sleep 2 # step {n}") for n in range(1, STEPS + 1)]
    with cli.server([*steps, text("All done.")], TOKENS) as server:
        limit = round(_cost(cli, TOKENS) * LIMIT_ANSWERS, 6)
        _start(herd, tmp_path, cli, server, budget={"cost_usd": limit})
        status = herd.wait_state(MAIN, "stopped", "completed", "failed", timeout_s=AGENT_WAIT_S)
        assert (status["state"], status["reason"]) == ("stopped", "budget:cost_usd"), (
            status,
            herd.events(MAIN),
        )
        crossed = next(
            k for k in range(1, server.served + 1) if _cost(cli, server.bill(last=k)) > limit
        )
        assert crossed == 5, crossed
        # Two seconds' work per answer: stopped before the answer after the crossing ended
        # (within seconds), and the spend at the stop at most 1.5 times the limit.
        assert server.served <= crossed + 1, server.served
        assert _cost(cli, server.bill()) <= 1.5 * limit
        # After the stop herd counts exactly what the server served, nothing twice.
        want = served_as_read(server.bill(), True)

        def settled() -> dict[str, Any] | None:
            status = herd.status(MAIN)
            usages = (status["usage"], status["usage_total"], status["fleet"]["usage_total"])
            return status if all(_figures(u) == want for u in usages) else None

        status = wait_until(settled, 30, f"the final figures {want} in herd status")
        assert status["usage"]["cost_usd"] == pytest.approx(_cost(cli, server.bill()))
        report = json.loads(herd.cli("report", MAIN, "--json").stdout)
        assert report["reason"] == "budget:cost_usd"
        assert _figures(report["usage"]) == want


@pytest.mark.pidns
def test_a_turns_budget_stops_a_gemini_run(live_herd: Herd, tmp_path: Path) -> None:
    herd = live_herd
    steps = [GEMINI.shell(f"sleep 1 # step {n}") for n in range(1, 9)]
    with GEMINI.server([*steps, text("All done.")], TOKENS) as server:  # nine turns
        _start(herd, tmp_path, GEMINI, server, budget={"turns": 3})
        status = herd.wait_state(MAIN, "stopped", "completed", "failed", timeout_s=AGENT_WAIT_S)
        assert (status["state"], status["reason"]) == ("stopped", "budget:turns"), (
            status,
            herd.events(MAIN),
        )
        assert 3 <= server.served <= 4, server.served
        settled = wait_until(
            lambda: (s := herd.status(MAIN))["usage"]["turns"] == server.served and s,
            30,
            "the turns the server answered in herd status",
        )
        assert settled["usage"]["turns"] == server.served
