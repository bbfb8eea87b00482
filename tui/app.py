"""The dashboard: composes the widgets, binds the keys and routes the workers' messages."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar

from rich.markup import escape
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import DataTable, Footer, Log, Static
from textual.worker import Worker, WorkerState

from agentherd.sessions.config import HerdConfig
from agentherd.sessions.states import ACTIVE_STATES
from agentherd.sessions.status import SessionStatus, parse_reply
from agentherd.supervisor.client import AsyncClient
from agentherd.supervisor.paths import socket_path_for
from agentherd.supervisor.protocol import ApiError
from agentherd.tui.feeds import follow_output, follow_snapshots, quiet_cancelled_wakeups
from agentherd.tui.messages import DaemonLost, LogLines, Snapshot
from agentherd.tui.render import state_text
from agentherd.tui.rows import cut, detail_lines, fleet_summary
from agentherd.tui.widgets import ConfirmScreen, HelpScreen, SessionTable

REFRESH_S = 0.25
"""The table is brought up to date four times a second: lively, and far below a frame each."""

LOG_MAX_LINES = 2000
"""The output view keeps this many lines; older ones are in the file (`herd logs`)."""

ACTION_IDS = ("start-stop", "restart", "kill", "logs", "ack", "help", "quit")
"""The names `[keys]` in herd.toml may rebind (underscores are accepted for hyphens)."""

SESSION_ACTIONS = frozenset({"start_stop", "restart", "kill", "logs", "hide_output", "help"})
"""Actions that read the table's selection, so they wait while a dialog is open."""


class HerdApp(App[None]):
    """The fleet at a glance, one row per session, driven entirely by the daemon's API."""

    CSS_PATH = "app.tcss"
    TITLE = "herd"
    BINDINGS: ClassVar[list[BindingType]] = [
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
            tooltip="Stop the selected session gracefully and begin a new task",
        ),
        Binding(
            "k",
            "kill",
            "Kill",
            id="kill",
            tooltip="SIGKILL every process of the selected session (asks first)",
        ),
        Binding(
            "l",
            "logs",
            "Output",
            id="logs",
            tooltip="Show the selected session's output below the table; again hides it",
        ),
        Binding(
            "a",
            "ack",
            "Ack",
            id="ack",
            tooltip="Acknowledge the selected session's open warnings: they leave its badge",
        ),
        Binding("question_mark", "help", "Help", id="help", tooltip="This list of keys"),
        Binding(
            "q",
            "quit",
            "Quit",
            id="quit",
            tooltip="Close the dashboard; the agents keep running (`herd tui` reattaches)",
        ),
        Binding("escape", "hide_output", "Hide output", show=False),
    ]

    def __init__(
        self, socket_path: Path, keys: dict[str, str] | None = None, config_label: str | None = None
    ) -> None:
        super().__init__()
        self.client = AsyncClient(socket_path)
        self.keys = dict(keys or {})
        self.config_label = config_label or str(socket_path)
        self.statuses: list[SessionStatus] = []
        self.output_session: str | None = None
        self._connected = False
        self._summary = ""
        self._details = ""

    # ----- composition --------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        """Summary line, banner, the table, the output view (hidden), the keys."""
        self.summary = Static("herd: connecting…", id="summary")
        self.banner = Static("", id="banner")
        self.table = SessionTable(id="sessions")
        self.output_title = Static("", id="output-title")
        self.output_log = Log(id="output", max_lines=LOG_MAX_LINES)
        yield self.summary
        yield self.banner
        self.body = Vertical(id="body")
        self.details = Static("", id="details", markup=False)
        with self.body:
            yield self.table
            yield self.details
            with Vertical(id="output-pane"):
                yield self.output_title
                yield self.output_log
        yield Footer()

    def on_mount(self) -> None:
        """Apply the user's keymap, start the snapshot feed and the refresh tick."""
        self._apply_keymap()
        quiet_cancelled_wakeups(asyncio.get_running_loop())
        self.run_worker(
            follow_snapshots(self.client, self.post_message),
            group="snapshots",
            exclusive=True,
            exit_on_error=False,
        )
        self.set_interval(REFRESH_S, self._refresh)
        self.table.focus()

    def _apply_keymap(self) -> None:
        """Rebind keys from herd.toml's [keys]; an unknown action name is a warning, not a crash."""
        keymap = {action.replace("_", "-"): key for action, key in self.keys.items()}
        unknown = sorted(set(keymap) - set(ACTION_IDS))
        if unknown:
            self.notify(
                f"[keys] in herd.toml: unknown action {', '.join(unknown)}; "
                f"known: {', '.join(ACTION_IDS)}",
                severity="warning",
                markup=False,
            )
        self.set_keymap({a: k for a, k in keymap.items() if a in ACTION_IDS})

    # ----- messages from the workers ------------------------------------------------------

    def on_snapshot(self, message: Snapshot) -> None:
        """Keep the newest snapshot; the refresh tick shows it."""
        self.statuses = message.sessions
        if not self._connected:
            self._connected = True
            self.banner.remove_class("-visible")
            self.table.remove_class("-stale")
            self._refresh()

    def on_daemon_lost(self, message: DaemonLost) -> None:
        """Say plainly that the daemon is gone; keep the last rows, dimmed, and keep retrying."""
        self._connected = False
        self.banner.update(f"daemon not reachable: {message.reason} (retrying)")
        self.banner.add_class("-visible")
        self.table.add_class("-stale")
        self._summary = f"herd  {self.config_label}  ·  the last known state:"
        self.summary.update(self._summary)

    def on_log_lines(self, message: LogLines) -> None:
        """Append a batch to the output view if it still shows that session."""
        if message.session != self.output_session:
            return
        if message.reset:
            self.output_log.clear()
        self.output_title.update(message.title)
        if message.lines:
            self.output_log.write_lines(message.lines)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place worker outcomes reach the person: a notice, never a traceback."""
        worker = event.worker
        if event.state == WorkerState.SUCCESS and isinstance(worker.result, str):
            self.notify(worker.result, markup=False, timeout=3)
        elif event.state == WorkerState.ERROR:
            error = worker.error
            text = error.message if isinstance(error, ApiError) else f"{error}"
            self.notify(
                text or type(error).__name__,
                title=worker.name or "error",
                severity="error",
                markup=False,
            )

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """Moving the cursor shows that session's details at once."""
        self._refresh()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a row shows that session's output."""
        self._show_output(str(event.row_key.value))

    # ----- the refresh tick ---------------------------------------------------------------

    def _refresh(self) -> None:
        """Bring the table and the summary up to date (uptimes move even without a snapshot)."""
        if not self._connected or not self.table.is_attached:
            return  # also while the app shuts down: the tick may outlive the widgets
        self.table.show(self.statuses)
        name = self.table.selected_session
        selected = next((s for s in self.statuses if s.session == name), None)
        details = "\n".join(
            cut(line, max(20, self.size.width - 2)) for line in detail_lines(selected)
        )
        if details != self._details:
            self._details = details
            self.details.update(details)
        summary = f"herd  {fleet_summary(self.statuses)}"
        if summary != self._summary:
            self._summary = summary
            self.summary.update(summary)

    # ----- actions --------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Session keys act on the table only; while a dialog is open they do nothing."""
        return not (action in SESSION_ACTIONS and len(self.screen_stack) > 1)

    def _selected(self) -> SessionStatus | None:
        """The status of the session under the cursor, or None (with a notice)."""
        name = self.table.selected_session
        status = next((s for s in self.statuses if s.session == name), None)
        if status is None:
            self.notify("no session selected", severity="warning")
        return status

    def _command(self, name: str, op: str, **args: Any) -> None:
        """Send one command to the daemon in the background; its outcome becomes a notice."""
        self.run_worker(
            self._call(name, op, **args), name=f"{op} {name}", group="commands", exit_on_error=False
        )

    async def _call(self, name: str, op: str, **args: Any) -> str:
        """Call the daemon and say what happened in a few words."""
        result = parse_reply(op, await self.client.call(op, name=name, **args))
        if isinstance(result, SessionStatus):
            return f"{name}: {state_text(result)}"
        verb = {"start": "started", "restart": "restarted"}.get(op, op)
        return f"{name}: {verb} {result.handle}"

    def action_start_stop(self) -> None:
        """Start the selected session when it is not active, stop it otherwise."""
        status = self._selected()
        if status is None:
            return
        name, state = status.session, status.state
        if state == "stopping":
            self.notify(f"{name} is already stopping", markup=False)
        elif state in ACTIVE_STATES:
            self._command(name, "stop")
        else:
            self._command(name, "start")

    def action_restart(self) -> None:
        """Stop the selected session (gracefully) and start a new task."""
        status = self._selected()
        if status is not None:
            self._command(status.session, "restart")

    def action_kill(self) -> None:
        """SIGKILL the selected session's run, after a confirmation that names it."""
        status = self._selected()
        if status is None:
            return
        name = status.session
        if status.state not in ACTIVE_STATES:
            self.notify(f"{name} is not running", markup=False)
            return

        def answered(yes: bool | None) -> None:
            """Kill only on an explicit yes."""
            if yes:
                self._command(name, "stop", kill=True)

        self.push_screen(ConfirmScreen(f"Kill {escape(name)}? y/n"), answered)

    def action_ack(self) -> None:
        """Acknowledge every open warning of the selected session (`herd ack NAME`)."""
        status = self._selected()
        if status is not None:
            self._command(status.session, "ack")

    def action_logs(self) -> None:
        """Show the selected session's output below the table; again on the same one hides it."""
        name = self.table.selected_session
        if name is None:
            return
        if name == self.output_session:
            self.action_hide_output()
        else:
            self._show_output(name)

    def _show_output(self, name: str) -> None:
        """Point the single output view at one session and start following its file."""
        self.output_session = name
        self.output_log.clear()
        self.output_title.update(f"{name}: …")
        self.body.add_class("-output")
        self.run_worker(
            follow_output(self.client, name, self.post_message),
            name=f"output {name}",
            group="output",
            exclusive=True,
            exit_on_error=False,
        )

    def action_hide_output(self) -> None:
        """Hide the output view and stop reading the file."""
        self.workers.cancel_group(self, "output")
        self.output_session = None
        self.body.remove_class("-output")

    def action_help(self) -> None:
        """List the keys as they are bound now (after [keys] rebinding)."""
        found = [
            active.binding
            for active in self.screen.active_bindings.values()
            if active.binding.id in ACTION_IDS
        ]
        found.sort(key=lambda binding: ACTION_IDS.index(binding.id or ""))
        lines = [(self.get_key_display(b), b.tooltip or b.description) for b in found]
        lines.insert(-2, ("enter", "Show the selected session's output"))
        lines.insert(-2, ("escape", "Hide the output"))
        self.push_screen(HelpScreen(lines))


def run_dashboard(config: HerdConfig) -> None:
    """Open the dashboard on the daemon that owns this config's state folder (`herd up`/`tui`)."""
    HerdApp(
        socket_path_for(config.state_dir), keys=config.keys, config_label=str(config.path)
    ).run()
