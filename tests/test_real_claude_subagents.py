"""Real Claude Code runs with a subagent (the Agent tool) and compactions, against the ledger.

A subagent's messages are billed like the main thread's, but Claude Code's `num_turns` counts
the main thread only, and a killed run's subagent answers are only in the subagent's own
transcript (`<session>/subagents/agent-*.jsonl`). A compaction request writes no usage at all:
herd estimates it from its `preTokens`. The scripted server makes Claude Code compact early
(`CLAUDE_CODE_AUTO_COMPACT_WINDOW` with `CLAUDE_AUTOCOMPACT_PCT_OVERRIDE`) and answers the
subagent from a script of its own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Herd, make_repo, wait_until
from model_servers import AnthropicServer, Served, Tokens, hang, text, tool
from realagents import (
    claude_env,
    completed,
    kill_mid_run,
    result_lines,
    run_usages,
    served_as_read,
    session_toml,
    start_main,
)

pytestmark = [pytest.mark.realagents, pytest.mark.timeout(180)]

COMPACT_EARLY = {
    "CLAUDE_CODE_AUTO_COMPACT_WINDOW": "100000",
    "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "1",
}
"""Compact once the context passes 1 % of a 100k window: every answer of 3000 tokens does."""

LARGE = Tokens(input=3000, output=30, cache_read=20, cache_write=10)
"""Answers large enough to trigger the early compaction."""


def _subagent(what: str) -> object:
    return tool("Agent", description=what, prompt=what, subagent_type="general-purpose")


def _total(figures: tuple[int, int, int, int]) -> int:
    return sum(figures)


def _start_only(home: Path, answers: list[Served]) -> list[Served]:
    """The answers Claude Code wrote to its transcripts only as it started them: usage at the
    start figure (`output_tokens: 1`), `stop_reason` null, and no copy after the true one.

    2.1.197 writes an assistant entry once its content is complete, before the stream's last
    usage when its write comes first (a subagent's answer often, any under load), and may
    never write it again: its true output then goes to nothing a killed run leaves.
    """
    final: dict[int, bool] = {}  # by input figure: each answer's is its own (`Tokens.nth`)
    for path in home.rglob("*.jsonl"):
        for line in path.read_text(errors="replace").splitlines():
            entry = json.loads(line)
            message = entry.get("message")
            if entry.get("type") == "assistant" and isinstance(message, dict):
                given = message.get("usage", {}).get("input_tokens")
                final[given] = final.get(given, False) or message.get("stop_reason") is not None
    return [e for e in answers if final.get(e.tokens.input) is False]


def _pre_tokens(log: Path) -> list[int]:
    """The `pre_tokens` of each compaction a Claude run printed, once by its uuid."""
    found: dict[str, int] = {}
    for line in log.read_text(errors="replace").splitlines():
        if '"compact_boundary"' in line:
            obj = json.loads(line)
            found[obj["uuid"]] = obj["compact_metadata"]["pre_tokens"]
    return list(found.values())


def test_a_run_with_a_subagent_counts_the_main_threads_turns_without_a_false_warning(
    herd: Herd, tmp_path: Path, claude: str
) -> None:
    repo = make_repo(tmp_path / "repo")
    go_on = tmp_path / "go-on"
    main = [_subagent("wait, then write sub.txt"), text("The subagent wrote sub.txt.")]
    helper = [
        tool("Bash", command=f"while [ ! -e {go_on} ]; do sleep 0.1; done", description="wait"),
        tool("Write", file_path=str(repo / "sub.txt"), content="s\n"),
        text("Wrote it."),
    ]
    with AnthropicServer(main, subagent_steps=helper) as server:
        env = claude_env(tmp_path / "home", server.url, claude)
        start_main(herd, session_toml("main", "claude", repo, env))

        # While the subagent works, herd has seen its first message, which is no main turn.
        # (2.1.197 waits for the subagent; 2.1.332 runs it in the background, after the main
        # thread's next answer.)
        def subagent_answered() -> tuple[int] | None:  # (its place): 0 is an answer too
            ledger = list(server.ledger)
            found = next((n for n, e in enumerate(ledger) if e.kind == "subagent"), None)
            if found is not None and [e.begun for e in ledger[: found + 1]] != list(
                range(1, found + 2)
            ):
                found = None  # an answer begun before it is not complete yet
            state = herd.status("main")["state"]
            assert found is not None or state in ("starting", "running"), (
                f"the run ended {state} before a subagent answer; served {server.ledger}; "
                f"events {[e['message'] for e in herd.events('main')]}"
            )
            return None if found is None else (found,)

        try:
            (first_sub,) = wait_until(subagent_answered, 90, "the subagent's first answer")
        except AssertionError as late:  # what the server served says where the run stood
            raise AssertionError(f"{late}; served {server.ledger}") from None
        so_far = server.ledger[: first_sub + 1]
        wait_until(
            lambda: (
                herd.status("main")["usage"]["input_tokens"]
                == server.bill(last=first_sub + 1).input
            ),
            what="the subagent's message read by herd",
        )
        assert herd.status("main")["usage"]["turns"] == sum(e.kind == "main" for e in so_far)
        go_on.touch()
        status = completed(herd)
        assert (repo / "sub.txt").read_text() == "s\n"
        kinds = [e.kind for e in server.ledger if e.scripted]
        assert kinds.count("subagent") == 3 and kinds[0] == kinds[-1] == "main", kinds
        # 2.1.332 prints a result when the main thread's turn ends and another after the turn
        # the subagent's report starts; each one's num_turns counts its own turns.
        results = result_lines(herd.root / ".herd" / "runs" / "main" / "1" / "output.log")
        usage = status["usage"]
        assert usage["turns"] == sum(r["num_turns"] for r in results) == kinds.count("main")
        assert not herd.events("main", "usage-backwards")
        billed = served_as_read(server.bill(), False)
        assert (
            usage["input_tokens"],
            usage["output_tokens"],
            usage["cache_read_tokens"],
            usage["cache_write_tokens"],
        ) == billed


@pytest.mark.pidns
def test_a_killed_run_keeps_its_subagents_and_compactions_spend(
    herd: Herd, tmp_path: Path, claude: str
) -> None:
    repo = make_repo(tmp_path / "repo")
    main = [
        tool("Write", file_path=str(repo / "a.txt"), content="a\n"),
        tool("Write", file_path=str(repo / "b.txt"), content="b\n"),
        _subagent("write sub.txt"),
        tool("Write", file_path=str(repo / "draft.txt"), content="half done\n"),
        hang(),
        text("Picked up where I left off."),
    ]
    helper = [tool("Write", file_path=str(repo / "sub.txt"), content="s\n"), text("Wrote it.")]
    with AnthropicServer(main, LARGE, subagent_steps=helper) as server:
        home = tmp_path / "home"
        env = {**claude_env(home, server.url, claude), **COMPACT_EARLY}
        start_main(herd, session_toml("main", "claude", repo, env))
        wait_until(server.hanging.is_set, 90, "the hang")
        before_kill = list(server.ledger)
        last = next(e for e in reversed(before_kill) if e.kind != "compaction")
        needle = f'"input_tokens":{last.tokens.input}'.encode()  # a copy of it, start or true
        kill_mid_run(herd, server.hanging, repo / "draft.txt", True, (home, "*.jsonl", needle))
        kinds = [e.kind for e in before_kill]
        assert "subagent" in kinds and "compaction" in kinds, kinds
        (killed,) = run_usages(herd, "main", 1)
        exact = [e for e in before_kill if e.kind != "compaction"]
        answers = sum(_total(served_as_read(e.tokens, False)) for e in exact)
        # A compaction prints no usage (2.1.197 and 2.1.332), nor writes any: herd counts the
        # context Claude Code counted before it (`pre_tokens`), an estimate.
        estimated = _pre_tokens(herd.root / ".herd" / "runs" / "main" / "1" / "output.log")
        assert len(estimated) == kinds.count("compaction"), (estimated, kinds)
        # Every figure of every answer served before the kill, the subagent's too, exactly,
        # each compaction at its estimate; an output Claude Code never wrote down (an answer
        # written only at its start), estimated from its content, never left at its 1.
        started = _start_only(home, exact)
        given, _, read, written = served_as_read(
            sum((e.tokens for e in exact), Tokens(0, 0, 0, 0)), False
        )
        found = (killed, answers, estimated, kinds, started)
        assert (killed[0], killed[2], killed[3]) == (given + sum(estimated), read, written), found
        if started:
            reported = sum(e.tokens.output for e in exact if e not in started)
            assert killed[1] > reported + len(started), found
        else:
            assert _total(killed) == answers + sum(estimated), found
        # The scripted server bills a compaction like any answer, whatever the context it
        # carries; Claude Code's count of that context (the last answer's usage and its own
        # estimate of what was added since) stays near it: 2.1.332 was 6.8 % over.
        billed = sum(_total(served_as_read(e.tokens, False)) for e in before_kill) - answers
        assert abs(sum(estimated) - billed) <= 0.1 * billed, (estimated, billed)
