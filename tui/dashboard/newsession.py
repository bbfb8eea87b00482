"""The new-session dialog (`[keys] new`): the fields of `herd new`, sent through its code."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import anyio
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Select, Static

from agentherd.sessions.adapters import AGENTS
from agentherd.supervisor.api.newsession import (
    Created,
    NewSession,
    NewSessionError,
    create_session,
)
from agentherd.supervisor.api.protocol import ApiError

FIELDS = (
    ("name", "name", "letters, digits, - and _"),
    ("prompt", "prompt", "the task (empty: the preset's prompt)"),
    ("repo", "repository", "a new worktree and branch herd/NAME of this repository..."),
    ("folder", "or folder", "...or an existing folder to work in"),
    ("budget", "budget USD", "a cost budget per task (empty: none)"),
)
"""The dialog's text fields: id, label, placeholder (the agent is a choice above them)."""


def ask_of(values: dict[str, str], agent: str, base: Path) -> NewSession:
    """What the fields ask for, as `herd new` takes it; paths relative to herd.toml's folder."""
    budget = values.get("budget", "").strip()
    try:
        budget_usd = float(budget) if budget else None
    except ValueError:
        raise NewSessionError(f"budget: {budget!r} is not a number of US dollars") from None
    repo, folder = values.get("repo", "").strip(), values.get("folder", "").strip()
    return NewSession(
        name=values.get("name", "").strip(),
        agent=agent,
        prompt=values.get("prompt", "").strip() or None,
        repo=base / Path(repo).expanduser() if repo else None,
        folder=base / Path(folder).expanduser() if folder else None,
        budget_usd=budget_usd,
    )


class NewSessionScreen(ModalScreen[Created | None]):
    """Name, agent, prompt, a repository or a folder, a budget: Enter adds and starts it; a
    mistake is shown in the dialog's last line, which stays open."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, config_path: Path) -> None:
        super().__init__()
        self.config_path = config_path

    def compose(self) -> ComposeResult:
        """The fields in a box, then the hint and the line where a mistake is said."""
        with VerticalScroll(classes="dialog", id="new-session"):
            yield Static("New session", classes="title")
            yield Label("agent")
            yield Select(
                [(name, name) for name in AGENTS], value="claude", allow_blank=False, id="agent"
            )
            for field_id, label, placeholder in FIELDS:
                yield Label(label)
                yield Input(placeholder=placeholder, id=field_id)
            yield Static("[b]enter[/b] add and start    [b]escape[/b] cancel", classes="hint")
            yield Static("", id="problem", markup=False)

    def on_mount(self) -> None:
        self.query_one("#name", Input).focus()

    def _values(self) -> dict[str, str]:
        return {field_id: self.query_one(f"#{field_id}", Input).value for field_id, *_ in FIELDS}

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter in any field: check and create, through `herd new`'s own code."""
        event.stop()
        problem = self.query_one("#problem", Static)
        agent = str(self.query_one("#agent", Select).value)
        try:
            ask = ask_of(self._values(), agent, self.config_path.parent)
            problem.update("adding…")
            made = await anyio.to_thread.run_sync(create_session, self.config_path, ask)
        except NewSessionError as exc:
            problem.update(str(exc))
            return
        except ApiError as exc:  # written, but the daemon refused the start: say why
            problem.update(exc.message)
            return
        self.dismiss(made)

    def action_cancel(self) -> None:
        self.dismiss(None)
