"""The run picker: every run of a session (number, start, how it ended, exit, size), to choose
the one whose output to read, besides stepping with `[` and `]`.

The runs come from what the daemon (or the state on disk) already answers: `log_info` names
the newest run and its file, the session's `run-started` and `run-exited` events say when each
began and how it ended, and each run's file gives its size.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import anyio
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from agentherd.sessions.sanitize import inert
from agentherd.sessions.status import parse_reply
from agentherd.supervisor.protocol import ApiError

EVENTS_PAGE = 1000
"""Events asked for at once while looking for the runs' starts and ends."""


@dataclass(frozen=True)
class RunRow:
    """One run as the picker lists it."""

    run: int
    started_at: str | None
    ended: str
    """How it ended: the outcome (success, crashed, ...), "running", or "?" when unknown."""
    exit: str
    """The exit code or the signal, "-" while running or unknown."""
    size_bytes: int | None
    """The output file's size; None when it is gone (the log cap deletes old runs' logs)."""


def _sizes(newest_path: Path, newest: int) -> dict[int, int | None]:
    """Each run's output size: run N's file sits beside the newest's, in folder N (file I/O)."""
    sizes: dict[int, int | None] = {}
    for run in range(1, newest + 1):
        try:
            sizes[run] = os.stat(newest_path.parent.parent / str(run) / newest_path.name).st_size
        except OSError:
            sizes[run] = None
    return sizes


async def read_runs(client: Any, session: str) -> list[RunRow]:
    """Every run of `session`, newest first."""
    info = parse_reply("log_info", await client.call("log_info", name=session))
    newest = info.current_run or info.run or 0
    if not newest or not info.path:
        return []
    started: dict[int, str] = {}
    ended: dict[int, dict[str, Any]] = {}
    since = 0
    while True:
        page = parse_reply(
            "events", await client.call("events", session=session, since=since, limit=EVENTS_PAGE)
        )
        for event in page:
            if event.run is not None and event.kind == "run-started":
                started[event.run] = event.at
            elif event.run is not None and event.kind == "run-exited":
                ended[event.run] = dict(event.data or {})
        if len(page) < EVENTS_PAGE:
            break
        since = page[-1].seq
    sizes = await anyio.to_thread.run_sync(_sizes, Path(info.path), newest)
    rows = []
    for run in range(newest, 0, -1):
        end = ended.get(run)
        if end is not None:
            how = str(end.get("outcome") or "ended")
            code, signal = end.get("exit_code"), end.get("signal")
            exit_text = str(code) if code is not None else str(signal or "-")
        else:
            how = "running" if run == newest and info.live else "?"
            exit_text = "-"
        rows.append(RunRow(run, started.get(run), how, exit_text, sizes.get(run)))
    return rows


def size_text(size_bytes: int | None) -> str:
    """1.2 KiB, 3.4 MiB; "gone" for a log the cap deleted."""
    if size_bytes is None:
        return "gone"
    size = float(size_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size_bytes} B"


def _short_time(at: str | None) -> str:
    """`12-01 16:58:06` of an ISO time; "?" when the start is not known."""
    return at[5:19].replace("T", " ") if at and len(at) >= 19 else "?"


class RunPicker(ModalScreen[int | None]):
    """Every run of one session; Enter shows the highlighted one, Escape keeps the view."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("q", "cancel", "Cancel", show=False),
        Binding("j", "cursor(1)", "Down", show=False),
        Binding("k", "cursor(-1)", "Up", show=False),
    ]

    def __init__(self, client: Any, session: str, shown_run: int | None) -> None:
        super().__init__()
        self.client = client
        self.session = session
        self.shown_run = shown_run
        self.rows: list[RunRow] = []

    def compose(self) -> ComposeResult:
        """A title, the table of runs, how to choose."""
        with Vertical(classes="dialog"):
            yield Static(f"Runs of {self.session}", classes="title", markup=False)
            yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
            yield Static("reading the runs…", id="runs-note", markup=False)
            yield Static("[b]enter[/b] show this run    [b]escape[/b] cancel", classes="hint")

    def on_mount(self) -> None:
        """Columns, then read the runs."""
        table = self.query_one(DataTable)
        for key, label in (
            ("run", "RUN"),
            ("started", "STARTED"),
            ("ended", "ENDED"),
            ("exit", "EXIT"),
            ("size", "SIZE"),
        ):
            table.add_column(label, key=key)
        table.focus()
        self._read()

    @work(exclusive=True, exit_on_error=False)
    async def _read(self) -> None:
        """Ask for the runs, then list them with the cursor on the run shown now."""
        try:
            rows = await read_runs(self.client, self.session)
        except (ApiError, OSError) as exc:  # the daemon went away: say so in the dialog
            self.query_one("#runs-note", Static).update(f"cannot read the runs: {exc}")
            return
        self.rows = rows
        table = self.query_one(DataTable)
        for row in rows:
            table.add_row(
                str(row.run),
                _short_time(row.started_at),
                inert(row.ended),
                inert(row.exit),
                size_text(row.size_bytes),
                key=str(row.run),
            )
        note = self.query_one("#runs-note", Static)
        note.update("" if rows else "no runs yet")
        note.display = not rows
        numbers = [row.run for row in rows]
        if self.shown_run in numbers:
            table.move_cursor(row=numbers.index(self.shown_run), animate=False)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter (or a click) on a run: show it."""
        event.stop()
        self.dismiss(int(str(event.row_key.value)))

    def action_cursor(self, step: int) -> None:
        """j/k move like the arrows."""
        table = self.query_one(DataTable)
        if table.row_count:
            table.move_cursor(row=max(0, min(table.row_count - 1, table.cursor_row + step)))

    def action_cancel(self) -> None:
        """Close, keeping the run shown."""
        self.dismiss(None)
