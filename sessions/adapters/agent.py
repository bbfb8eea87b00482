"""What an adapter module declares about its agent, as `AGENT = Agent(...)`: the registry's entry.

`sessions.adapters` finds every module of this package that declares one; each list of agents
(herd.toml's `agent` values, `herd init --agent`, its presets, the adapter for a run, which
agents report a cost) is derived from those declarations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from agentherd.sessions.adapters.base import OutputParser

PROGRESS_FILE = "progress.md"
"""The progress file a preset names, unless its CLI has a convention of its own (Claude's)."""


def work_prompt(progress_file: str = PROGRESS_FILE) -> str:
    """The whole job, as a preset asks for it: a run that does not commit checkpoints nothing."""
    return (
        f"Read {progress_file} and feature_list.json, then implement the next failing feature, "
        "run the tests, commit, and update the progress file."
    )


CONTINUE_PROMPT = (
    "Continue where you stopped. If herd restarted you after a crash, it saved your uncommitted "
    "edits on {rescue_ref} and reset the tree to {checkpoint} ('none' where it did not)."
)
"""What a resume's `{message}` says when no `herd send` text waits: where a crashed run's
uncommitted work went."""

MESSAGE = "{message}"
"""The placeholder in `resume` that `herd send` fills with its text, used once by the next run;
without a text, CONTINUE_PROMPT."""


@dataclass(frozen=True)
class Preset:
    """The session block `herd init --agent NAME` writes: argv lists and extra environment.

    Headless runs cannot ask for permission: each preset grants what editing, testing and
    committing need (docs/guide.md: agent presets).
    """

    command: tuple[str, ...]
    resume: tuple[str, ...] | None = None
    """None: the agent cannot be resumed by its session id (the block shows a comment)."""
    env: Mapping[str, str] = field(default_factory=dict)
    progress: str = PROGRESS_FILE
    """The progress file the block names and the prompt asks the agent to keep."""
    prompt_at: int | None = None
    """Where in `command` the prompt is, which `herd new --prompt` replaces (None: appended)."""


@dataclass(frozen=True)
class Agent:
    """One `agent` value of herd.toml: its adapter, its preset, and what its runs cost."""

    name: str
    parser: type[OutputParser]
    preset: Preset
    order: int
    """Where it stands in the lists a person reads (`herd init --help`, error messages)."""
    price: str | None = None
    """Its usual model's key in sessions/prices.py: the estimate for a session without `price`."""
    reports_cost: bool = False
    """The adapter gives a cost: reported, or estimated by the model the agent names."""
    ends_with_result: bool = False
    """Its output ends with a result line: a clean exit without one is `no-result`."""
    counts_turns: bool = True
    """herd sees each of its model's turns: a `turns` budget can act (herd check refuses one
    where it cannot)."""
    interactive_resume: tuple[str, ...] = ()
    """What an interactive session's own `command` is given to open the agent's interface on
    its stored conversation (`{session_id}`); empty: it cannot be."""
    key_env: tuple[str, ...] = ()
    """The environment variables its API key comes from, first found wins; none set: its own
    login. They name the session's default `account` (sessions/accounts.py)."""
