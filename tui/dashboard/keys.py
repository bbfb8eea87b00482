"""The dashboard's keys: the app's bindings, the names `[keys]` may rebind, the help's lines."""

from __future__ import annotations

from dataclasses import replace

from textual.app import App
from textual.binding import Binding, BindingType
from textual.dom import DOMNode

from agentherd.sessions.keynames import ACTION_IDS
from agentherd.tui.dashboard.help import KeyLine

__all__ = ["ACTION_IDS", "APP_BINDINGS", "FLEET_ONLY", "bindings_of", "key_lines"]

FLEET_ONLY = frozenset({"open", "logs", "filter", "sort"})
"""Keys of the fleet view, left out of the session screen's help (there `/` searches)."""

APP_BINDINGS: list[BindingType] = [
    Binding("enter", "open", "Open", id="open", tooltip="The session screen: output, plan..."),
    # The keys a newcomer needs first: an 80-column footer shows only the first few.
    Binding(
        "l",
        "logs",
        "Output",
        id="logs",
        tooltip="Show the selected session's output below the table; again hides it",
    ),
    Binding("question_mark", "help", "Help", id="help", tooltip="Keys and what symbols mean"),
    Binding(
        "q",
        "quit",
        "Detach",
        id="quit",
        tooltip="Close the dashboard; the agents keep running (`herd tui` reattaches)",
    ),
    Binding(
        "s",
        "start_stop",
        "Start/stop",
        id="start-stop",
        tooltip="Start the selected session, or stop it if it is active",
    ),
    Binding(
        "r",
        "restart",
        "Restart",
        id="restart",
        tooltip="Stop the selected session gracefully and begin a new task (asks first)",
    ),
    Binding(
        "K",
        "kill",
        "Kill",
        id="kill",
        tooltip="SIGKILL every process of the selected session (asks first)",
    ),
    Binding(
        "p",
        "pause_resume",
        "Pause/resume",
        id="pause-resume",
        tooltip="SIGSTOP the selected session's run, or SIGCONT it when paused",
    ),
    Binding(
        "A",
        "approve",
        "Approve plan",
        id="approve",
        tooltip="Adopt the changed plan as the new baseline (asks first)",
    ),
    Binding(
        "X",
        "reject",
        "Reject plan",
        id="reject",
        tooltip="Write the baseline plan back; items passing now stay passing (asks first)",
    ),
    Binding(
        "a",
        "ack",
        "Ack",
        id="ack",
        tooltip="Acknowledge the selected session's open warnings: they leave its badge",
    ),
    Binding(
        "m",
        "send",
        "Send",
        id="send",
        show=False,
        tooltip="A one-line message for the selected session, as `herd send NAME TEXT`",
    ),
    Binding(
        "e",
        "editor",
        "Editor",
        id="editor",
        show=False,
        tooltip="Open the session's worktree in $EDITOR (the dashboard waits)",
    ),
    Binding(
        "exclamation_mark",
        "shell",
        "Shell",
        id="shell",
        show=False,
        tooltip="A shell in the session's worktree; exit returns here",
    ),
    Binding(
        "Q",
        "stop_all",
        "Stop all",
        id="stop-all",
        show=False,
        tooltip="Stop every session and the daemon, then quit (asks first)",
    ),
    Binding(
        "c",
        "new_session",
        "New",
        id="new",
        show=False,
        tooltip="Create a session: name, agent, prompt, a new worktree or a folder, budget",
    ),
    Binding("escape", "hide_output", "Hide output", show=False),
]
"""The app's keys; each with an id [keys] may rebind, a tooltip the help shows."""


def bindings_of(node: DOMNode, keymap: dict[str, str]) -> list[Binding]:
    """The bindings `node`'s class declares (its bases' too; a subclass's key replaces its
    base's, as Textual merges them), with the keys `keymap` (id -> keys) rebinds."""
    keys: dict[str, list[Binding]] = {}
    for cls in reversed(type(node).__mro__):
        own: dict[str, list[Binding]] = {}
        for binding in Binding.make_bindings(cls.__dict__.get("BINDINGS", [])):
            own.setdefault(binding.key, []).append(binding)
        keys.update(own)
    return [
        replace(b, key=keymap[b.id].split(",")[0].strip()) if b.id and b.id in keymap else b
        for found in keys.values()
        for b in found
    ]


def key_lines(
    app: App[None], nodes: tuple[DOMNode, ...], keymap: dict[str, str], fleet: bool = True
) -> list[KeyLine]:
    """Every key of `nodes` (the app and the fleet view) as bound now, in the order of
    ACTION_IDS; without `fleet` (the session screen's help) the fleet view's own keys are left
    out (seen in tmux: its help said `/` filters, where `/` searches the output)."""
    fleet_only = set() if fleet else FLEET_ONLY
    found = {
        binding.id: binding
        for node in nodes
        for binding in bindings_of(node, keymap)
        if binding.id in ACTION_IDS and binding.id not in fleet_only
    }
    lines = []
    for action_id in ACTION_IDS:
        binding = found.get(action_id)
        if binding is not None:
            lines.append((app.get_key_display(binding), binding.tooltip or binding.description))
    lines.insert(1 if fleet else 0, ("j/k ↓/↑", "Move the cursor"))
    if fleet:  # the pane's own keys are in no footer until it has the focus
        lines.append(("tab", "Into the output pane (l): / [ ] L v w g G work there"))
    lines.append(("ctrl+p", "Command palette: type a verb and a session"))
    return lines
