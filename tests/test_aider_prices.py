"""Aider's spend under the real daemon: its tokens priced from herd's table where its model is
known (Aider's own `Cost:` leaves out what it does not count), unpriced where it is not.

The output is aider-chat 0.86.2's (tests/fixtures/agents/real/aider-run.log), replayed by a
small program in its place: Aider itself is not installed here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import PY, Herd

from agentherd.sessions.prices import price_of

REAL_RUN = Path(__file__).parent / "fixtures" / "agents" / "real" / "aider-run.log"

PRICED_RUN = """Aider v0.86.2
Main model: anthropic/claude-sonnet-4-5 with diff edit format, prompt cache, infinite output
Weak model: anthropic/claude-haiku-4-5
Git repo: .git with 1 files
Tokens: 6.1k sent, 1.2k cache write, 3.4k cache hit, 512 received.
Cost: $0.01 message, $0.01 session.
Applied edit to hello.txt
Commit 58c001b agent: add hello.txt
"""
"""Aider on a model herd knows: two cache figures, so its `Cost:` comes on the next line."""


def aider_session(output: Path) -> str:
    """A session of agent `aider` whose program prints `output` as Aider would, then exits."""
    command = json.dumps([PY, "-c", f"print(open({str(output)!r}).read(), end='')"])
    return (
        f'[[session]]\nname = "a"\nagent = "aider"\ncommand = {command}\n'
        'restart = "never"\ncwd = "."\n'
    )


def test_aiders_tokens_are_priced_from_the_table_for_a_model_herd_knows(
    herd: Herd, tmp_path: Path
) -> None:
    output = tmp_path / "aider.log"
    output.write_text(PRICED_RUN)
    herd.write(aider_session(output))
    herd.start().call("start", name="a")
    usage = herd.wait_state("a", "completed", "failed")["usage"]
    # `sent` counts the cache figures: input is what is left of it.
    tokens = (6100 - 1200 - 3400, 512, 3400, 1200)
    assert (
        usage["input_tokens"],
        usage["output_tokens"],
        usage["cache_read_tokens"],
        usage["cache_write_tokens"],
    ) == tokens
    price = price_of("claude-sonnet-4-5")
    assert price is not None
    expected = price.tokens_cost_usd(*tokens)  # not Aider's own $0.01
    assert usage["cost_usd"] == pytest.approx(expected) and usage["cost_estimated"] is True
    assert usage["cost_unpriced_model"] is None


def test_aiders_unknown_model_is_unpriced(herd: Herd) -> None:
    herd.write(aider_session(REAL_RUN))
    herd.start().call("start", name="a")
    usage = herd.wait_state("a", "completed", "failed")["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (649, 9)
    assert usage["cost_usd"] is None
    assert usage["cost_unpriced_model"] == "openai/test-model"
    assert '[prices."openai/test-model"]' in herd.cli("status", "a").stdout
