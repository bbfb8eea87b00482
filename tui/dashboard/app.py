"""The dashboard: composes the fleet view and the session screen, binds keys, routes messages."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path
from typing import Any, ClassVar

from textual import events
from textual.app import App, ComposeResult, SuspendNotSupported
from textual.binding import BindingType
from textual.screen import ModalScreen
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from agentherd.sessions.config import HerdConfig
from agentherd.sessions.keynames import TERMINAL_ACTION_IDS
from agentherd.sessions.states import ACTIVE_STATES
from agentherd.sessions.status import SessionStatus, parse_reply
from agentherd.supervisor.api.client import AsyncClient
from agentherd.supervisor.api.protocol import ApiError
from agentherd.supervisor.files.paths import socket_path_for
from agentherd.tui.dashboard.actions import (
    READ_ONLY_NOTE,
    SESSION_ACTIONS,
    SessionKeys,
    applying_keys,
    done_text,
)
from agentherd.tui.dashboard.collector import QuietCollector
from agentherd.tui.dashboard.feeds import quiet_cancelled_wakeups
from agentherd.tui.dashboard.fleet import FleetView
from agentherd.tui.dashboard.fleetfeed import follow_snapshots
from agentherd.tui.dashboard.footer import SessionFooter
from agentherd.tui.dashboard.help import HelpScreen, KeyLine
from agentherd.tui.dashboard.keys import ACTION_IDS, APP_BINDINGS, bindings_of, key_lines
from agentherd.tui.dashboard.messages import DaemonLost, Snapshot
from agentherd.tui.dashboard.newsession import Created, NewSessionScreen
from agentherd.tui.dashboard.palette import SessionCommands
from agentherd.tui.dashboard.send_dialog import ask_and_send
from agentherd.tui.dashboard.session_screen import SessionScreen
from agentherd.tui.dashboard.terminal_tab import TerminalView
from agentherd.tui.dashboard.widgets import ConfirmScreen, SessionTable

TICK_S = 1.0
"""Uptimes move once a second; everything else changes only when the daemon says so."""


class HerdApp(App[None]):
    """The fleet at a glance and one session in depth, driven entirely by the daemon's API."""

    CSS_PATH = "app.tcss"
    TITLE = "herd"
    COMMANDS = App.COMMANDS | {SessionCommands}
    BINDINGS: ClassVar[list[BindingType]] = APP_BINDINGS

    def __init__(
        self,
        socket_path: Path | None = None,
        keys: dict[str, str] | None = None,
        config_label: str | None = None,
        client: Any = None,
        worktrees: dict[str, Path] | None = None,
        notes: dict[str, str] | None = None,
        config_path: Path | None = None,
    ) -> None:
        super().__init__()
        self.config_path = config_path
        """herd.toml, which the new-session dialog adds to (None: no dialog)."""
        self.client = client if client is not None else AsyncClient(socket_path or Path())
        self.read_only = bool(getattr(self.client, "read_only", False))
        self.keys = dict(keys or {})
        self.config_label = config_label or str(socket_path)
        self.worktrees = dict(worktrees or {})
        self.notes = dict(notes or {})
        self.statuses: list[SessionStatus] = []
        self._by_name: dict[str, SessionStatus] = {}
        self._connected = False
        self._frozen = False
        self._session_screen: SessionScreen | None = None
        self.collector = QuietCollector()
        """Full garbage-collection passes between keys (collector.py)."""
        self.keymap_ids: dict[str, str] = {}
        """The [keys] rebinding in force (action id -> keys)."""
        self.session_keys = SessionKeys(
            notify=lambda text: self.notify(text, markup=False),
            confirm=self._confirm,
            command=self._command,
        )

    # ----- composition --------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        """The fleet view and the keys."""
        self.fleet = FleetView(id="fleet")
        self.fleet.notes = self.notes
        self.fleet.hosts = bool(getattr(self.client, "across_hosts", False))
        yield self.fleet
        yield SessionFooter()

    @property
    def table(self) -> SessionTable:
        """The fleet's session table."""
        return self.fleet.table

    def on_mount(self) -> None:
        """Apply the user's keymap, start the snapshot feed and the clock tick."""
        self._apply_keymap()
        quiet_cancelled_wakeups(asyncio.get_running_loop())
        self.run_worker(
            follow_snapshots(self.client, self.post_message),
            group="snapshots",
            exclusive=True,
            exit_on_error=False,
        )
        self.set_interval(TICK_S, self._tick)
        self.set_interval(TICK_S, self.collector.tick)
        self.table.focus()
        if self.read_only:
            self.fleet.set_stale(READ_ONLY_NOTE)

    def on_unmount(self) -> None:
        """Closed: the garbage collector as Python had it."""
        self.collector.release()

    def _apply_keymap(self) -> None:
        """Rebind keys from herd.toml's [keys]; an unknown action name is a warning, not a crash."""
        keymap = {action.replace("_", "-"): key for action, key in self.keys.items()}
        unknown = sorted(set(keymap) - set(ACTION_IDS) - set(TERMINAL_ACTION_IDS))
        if unknown:
            self.notify(
                f"[keys] in herd.toml: unknown action {', '.join(unknown)}; "
                f"known: {', '.join(ACTION_IDS)}",
                severity="warning",
                markup=False,
            )
        self.keymap_ids = {a: k for a, k in keymap.items() if a in ACTION_IDS}
        self.set_keymap(self.keymap_ids)

    async def on_event(self, event: events.Event) -> None:
        """Every key the person types holds the fleet's order still for a moment (fleet.py)."""
        if isinstance(event, events.Key) and not event.is_forwarded and self.table.is_attached:
            self.fleet.hold_order()
            self.collector.saw_key()
        await super().on_event(event)

    # ----- messages from the workers ------------------------------------------------------

    def on_snapshot(self, message: Snapshot) -> None:
        """Show the newest statuses in the fleet view and on an open session screen; only the
        rows of the sessions that changed are touched."""
        self.statuses = [s for s in message.sessions if not s.archived]  # `herd archive`
        self._by_name = {s.session: s for s in self.statuses}
        changed = message.changed
        if not self.table.is_attached:
            return  # the app is shutting down
        if not self._connected:
            self._connected = True
            self.fleet.set_stale(READ_ONLY_NOTE if self.read_only else None)
            if not self._frozen:  # once the first fleet is drawn
                self._frozen = True
                self.call_after_refresh(self.collector.freeze)
        self.fleet.show(self.statuses, changed)
        if self.output_session is None:
            self.fleet.place_output()  # the first rows: the pane shows where there is room
        for screen in self.screen_stack:
            if isinstance(screen, SessionScreen) and (changed is None or screen.session in changed):
                screen.show_status(self.status_of(screen.session))
        self.follow_footer()

    def on_daemon_lost(self, message: DaemonLost) -> None:
        """Say plainly that the daemon is gone; keep the last rows, dimmed, and keep retrying."""
        self._connected = False
        if not self.table.is_attached:
            return  # the app is shutting down
        self.fleet.set_stale(f"daemon not reachable: {message.reason} (retrying)")
        self.fleet.query_one("#summary", Static).update(
            f"herd  {self.config_label}  ·  the last known state:"
        )

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

    def on_fleet_view_selected(self, message: FleetView.Selected) -> None:
        """The output pane and the footer follow the cursor, so neither shows another
        session's output or keys."""
        self.follow_footer()
        self.fleet.place_output()

    def on_resize(self, event: events.Resize) -> None:
        """A larger or smaller screen: the output pane shows or goes (unless `l` chose)."""
        self.fleet.place_output()

    @property
    def output_session(self) -> str | None:
        """Whose output the fleet's pane shows (None: the pane is hidden)."""
        return self.fleet.output_session

    def on_line_table_row_selected(self, event: SessionTable.RowSelected) -> None:
        """Enter (or a click) on a session's row opens its screen."""
        if event.table is self.table:
            self.open_session(event.row_key)

    def _tick(self) -> None:
        """Once a second: the uptimes on screen (nothing else changes with the clock)."""
        if self._connected and self.table.is_attached and self.screen is self.screen_stack[0]:
            self.fleet.tick()

    # ----- what screens ask of the app ----------------------------------------------------

    def footer_subject(self) -> tuple[str | None, dict[str, str]]:
        """The session the keys act on now (on screen, or under the cursor) and the words of
        the keys that apply to its state (SessionFooter)."""
        screen = self.screen
        if isinstance(screen, ModalScreen):
            return None, {}
        name = screen.session if isinstance(screen, SessionScreen) else self.table.selected_session
        return name, applying_keys(self.status_of(name), self.read_only)

    def follow_footer(self) -> None:
        """Bring the footer of the screen on top up to date with its session and state."""
        if not self.screen_stack:  # a cursor message can arrive as the app closes
            return
        for footer in self.screen.query(SessionFooter):
            footer.follow()

    def status_of(self, name: str | None) -> SessionStatus | None:
        """The newest status of session `name`, or None."""
        return self._by_name.get(name) if name is not None else None

    def shown_names(self) -> list[str]:
        """The sessions in the fleet view's current order and filter."""
        return list(self.table.order)

    def select(self, name: str) -> None:
        """Put the fleet's cursor on session `name` (clearing a filter that hides it)."""
        if name not in self.table.order:
            self.fleet.filter_text = ""
        order = self.table.order
        if name in order:
            self.table.move_cursor(row=order.index(name), animate=False)

    def open_session(self, name: str, tab: str = "output") -> None:
        """The session screen of `name`, on `tab` (the one open follows it: one deep, so
        Escape always returns to the fleet)."""
        screen = self._session_screen
        if screen is not None and screen in self.screen_stack:
            screen.session = name
            screen.action_tab(tab)
            return
        self.fleet.pause_output()  # the session screen reads the output itself; back, it returns
        if screen is None:  # one, kept: shown again for the next session
            screen = self._session_screen = SessionScreen(name, tab)
            self.install_screen(screen, "session")
        else:
            screen.reopen(name, tab)
        self.push_screen(screen, lambda _: self.fleet.place_output())

    def act_on(self, action: str, name: str) -> None:
        """A command palette choice: select the session, then act on it."""
        self.select(name)
        if action in ("output", "open", "report", "events", "checkpoints", "spend"):
            self.open_session(name, "output" if action == "open" else action)
            return
        method = {
            "start": lambda: self._command(name, "start"),
            "stop": lambda: self._command(name, "stop"),
            "pause": lambda: self._command(name, "pause"),
            "resume": lambda: self._command(name, "resume"),
        }.get(action)
        if method is not None:
            method()
        else:
            self.call_later(self.run_action, action)

    # ----- actions --------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Session keys act on the selection only; while a dialog is open they do nothing.

        The fleet's own keys (open, the output pane) are hidden on the session screen.
        """
        if action in ("open", "logs") and isinstance(self.screen, SessionScreen):
            return False
        if action == "quit" and getattr(self.focused, "typing", False):
            return False  # ctrl+q is the Terminal tab's detach key while it types
        changes = action in SESSION_ACTIONS or action == "new_session"
        return not (changes and isinstance(self.screen, ModalScreen))

    def _selected(self) -> SessionStatus | None:
        """The session on screen (or under the cursor), or None (with a notice)."""
        screen = self.screen
        name = screen.session if isinstance(screen, SessionScreen) else self.table.selected_session
        status = self.status_of(name)
        if status is None:
            self.notify("no session selected", severity="warning")
        return status

    def _changing(self) -> SessionStatus | None:
        """The selected session, for an action that changes it (refused when read-only)."""
        if self.read_only:
            self.notify(READ_ONLY_NOTE, severity="warning", markup=False)
            return None
        return self._selected()

    def _command(self, name: str, op: str, **args: Any) -> None:
        """Send one command to the daemon in the background; its outcome becomes a notice."""
        if self.read_only:
            self.notify(READ_ONLY_NOTE, severity="warning", markup=False)
            return
        before = self.status_of(name)
        self.run_worker(
            self._call(name, op, before, **args),
            name=f"{op} {name}",
            group="commands",
            exit_on_error=False,
        )

    async def _call(self, name: str, op: str, before: SessionStatus | None, **args: Any) -> str:
        """Call the daemon and say what was done to whom, in a few words."""
        result = parse_reply(op, await self.client.call(op, name=name, **args))
        return done_text(op, name, result, before)

    def _confirm(self, question: str, consequence: str, then: Any) -> None:
        """Ask first; run `then()` only on an explicit yes."""

        def answered(yes: bool | None) -> None:
            if yes:
                then()

        self.push_screen(ConfirmScreen(question, consequence), answered)

    def action_open(self) -> None:
        """The session screen of the selected session."""
        status = self._selected()
        if status is not None and not isinstance(self.screen, SessionScreen):
            self.open_session(status.session)

    def action_start_stop(self) -> None:
        """Start the selected session when it is not active, stop it otherwise."""
        self.session_keys.start_stop(self._changing())

    def action_restart(self) -> None:
        """Restart the selected session, after a confirmation."""
        self.session_keys.restart(self._changing())

    def restart_from(self, name: str, sha: str) -> None:
        """Restart `name` from checkpoint `sha`, after a confirmation that says what happens."""
        if self.read_only:
            self.notify(READ_ONLY_NOTE, severity="warning", markup=False)
            return
        self.session_keys.restart_from(name, sha)

    def action_kill(self) -> None:
        """SIGKILL the selected session's run, after a confirmation that names it."""
        self.session_keys.kill(self._changing())

    def action_pause_resume(self) -> None:
        """Pause the selected session's run, or resume it when paused."""
        self.session_keys.pause_resume(self._changing())

    def action_approve(self) -> None:
        """Adopt the changed plan as the baseline, after a confirmation."""
        self.session_keys.approve(self._changing())

    def action_reject(self) -> None:
        """Write the baseline plan back, after a confirmation."""
        self.session_keys.reject(self._changing())

    def _in_worktree(self, argv: list[str]) -> None:
        """Run `argv` in the selected session's worktree with the terminal handed over."""
        status = self._selected()
        if status is None:
            return
        folder = self.worktrees.get(status.session)
        if folder is None:
            self.notify(f"the worktree of {status.session} is not known here", markup=False)
            return
        try:
            with self.suspend():
                subprocess.run([*argv], cwd=folder, check=False)
        except (OSError, SuspendNotSupported) as exc:  # no such editor; no terminal to hand over
            self.notify(f"cannot run {argv[0]} in {folder}: {exc}", severity="error", markup=False)

    def action_editor(self) -> None:
        """Open the worktree in $EDITOR."""
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
        self._in_worktree([*editor.split(), "."])

    def action_shell(self) -> None:
        """A shell in the worktree."""
        self._in_worktree([os.environ.get("SHELL") or "/bin/sh"])

    def action_send(self) -> None:
        """A one-line text for the selected session, as `herd send NAME TEXT`."""
        status = self._changing()
        if status is not None:
            ask_and_send(self, status.session, self.run_worker)

    def action_ack(self) -> None:
        """Acknowledge every open warning of the selected session (`herd ack NAME`)."""
        self.session_keys.ack(self._selected())

    def action_logs(self) -> None:
        """Show the selected session's output below the table, or hide it."""
        self.fleet.toggle_output()

    def action_hide_output(self) -> None:
        """Hide the output pane (until `l`) and stop reading the file."""
        self.fleet.hide_output()

    def action_new_session(self) -> None:
        """The new-session dialog: `herd new`'s fields, added to herd.toml and started."""
        if self.read_only or self.config_path is None:
            self.notify(READ_ONLY_NOTE, severity="warning", markup=False)
            return

        def made(created: Created | None) -> None:
            if created is not None:
                self.worktrees[created.name] = created.cwd  # `e` and `!` work there at once
                self.notify(f"added {created.name}: {created.handle or 'not started'}")

        self.push_screen(NewSessionScreen(self.config_path), made)

    def action_stop_all(self) -> None:
        """Stop every session and the daemon, then quit (after a confirmation)."""
        if self.read_only:
            self.notify(READ_ONLY_NOTE, severity="warning", markup=False)
            return
        count = sum(1 for s in self.statuses if s.state in ACTIVE_STATES)
        self._confirm(
            f"Stop all {count} active session(s) and quit?"
            if count
            else "No session is active: stop the daemon and quit?",
            "Each agent gets its stop signal and grace period, then the daemon exits. "
            "`herd up` starts them again.",
            lambda: self.run_worker(self._down(), group="commands", exit_on_error=False),
        )

    async def _down(self) -> None:
        """`herd down`, then close the dashboard."""
        self.notify("stopping every session…", markup=False)
        await self.client.call("down")
        self.exit()

    def key_lines(self, fleet: bool = True) -> list[KeyLine]:
        """Every app and fleet key as bound now (keys.py); without `fleet`, for the session
        screen's help."""
        return key_lines(self, (self, self.fleet), self.keymap_ids, fleet)

    def action_help(self) -> None:
        """The keys as they are bound now, the current view's keys, and a legend."""
        screen = self.screen
        view_lines: list[KeyLine] = []
        if isinstance(screen, SessionScreen):
            views = (screen, *screen.query(TerminalView))  # the Terminal tab's take-input key
            bindings = [b for view in views for b in bindings_of(view, self.keymap_ids)]
            view_lines = [
                (self.get_key_display(b), b.tooltip or b.description) for b in bindings if b.tooltip
            ]
        fleet = not isinstance(screen, SessionScreen)
        self.push_screen(HelpScreen(self.key_lines(fleet), view_lines))


def run_dashboard(
    config: HerdConfig, client: Any = None, notes: dict[str, str] | None = None
) -> None:
    """Open the dashboard on the daemon that owns this config's state folder (`herd up`/`tui`);
    with `client` an `AsyncDiskClient`, read-only on the state on disk."""
    HerdApp(
        socket_path_for(config.state_dir),
        keys=config.keys,
        config_label=str(config.path),
        client=client,
        worktrees={s.name: s.cwd for s in config.sessions},
        notes=notes,
        config_path=config.path,
    ).run()
