"""The dashboard's send key: a one-line text for a session, as `herd send NAME TEXT` gives it
(the same `send` request; its reply said in the same words, tui/render.py `send_said`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from agentherd.sessions.status import parse_reply
from agentherd.tui.render import send_said


class SendScreen(ModalScreen[str | None]):
    """Ask for the text to send to one session; Enter sends it, Escape sends nothing."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", show=False),
    ]

    def __init__(self, session: str) -> None:
        super().__init__()
        self.session = session

    def compose(self) -> ComposeResult:
        """The session's name, what a send does, the one line to type."""
        with Vertical(classes="dialog"):
            yield Static(f"Send to {self.session}", id="question", markup=False)
            yield Static(
                "An interactive session gets it typed into its terminal, then Enter; a "
                "headless one as its next prompt (herd send).",
                id="consequence",
                markup=False,
            )
            yield Input(placeholder="the text", id="send-text")
            yield Static("[b]enter[/b] sends    [b]escape[/b] cancels", classes="hint")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Send the line; an empty one is nothing to send."""
        if event.value.strip():
            self.dismiss(event.value)
        else:
            self.notify("type the text to send first (escape cancels)", markup=False)

    def action_cancel(self) -> None:
        self.dismiss(None)


async def send_text(client: Any, name: str, text: str) -> str:
    """Give session `name` the text through the daemon's `send`; what became of it."""
    reply = parse_reply("send", await client.call("send", name=name, text=text))
    return send_said(name, reply, wait=False, timeout_s=None)


def ask_and_send(app: Any, name: str, run: Callable[..., Any]) -> None:
    """Open the dialog for `name`; on a text, `run` (the app's worker runner) sends it and
    the app says the reply."""

    def answered(text: str | None) -> None:
        if text:
            run(
                send_text(app.client, name, text),
                name=f"send {name}",
                group="commands",
                exit_on_error=False,
            )

    app.push_screen(SendScreen(name), answered)
