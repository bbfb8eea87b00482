"""The run picker: every run of a session (number, start, how it ended, exit, size), to choose
the one whose output to read, besides stepping with `[` and `]`.

The runs come from what the daemon (or the state on disk) already answers: `log_info` names
the newest run and its file, the session's `run-started` and `run-exited` events (only those:
a long session has thousands of others) say when each began and how it ended, and each run's
file gives its size. The output view already knows the newest run and its file, so the rows
are listed at once from that and the sizes, and the starts and ends fill in when the daemon
answers: under a busy fleet its answer took seconds (issue 13).
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

from agentherd.sessions.records import Event
from agentherd.sessions.sanitize import inert
from agentherd.sessions.status import parse_reply
from agentherd.supervisor.api.protocol import ApiError

EVENTS_PAGE = 1000
"""Events asked for at once while looking for the runs' starts and ends."""

RUN_KINDS = ["run-started", "run-exited"]
"""The only events the picker reads."""

PENDING = "…"
"""A start or an end not known yet: the daemon has not answered."""


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
    sized: bool = True
    """False while the file has not been looked at yet (the size shows "…")."""


def run_path(newest_path: Path, run: int) -> Path:
    """Run `run`'s output file: beside the newest's, in folder `run`."""
    return newest_path.parent.parent / str(run) / newest_path.name


def _sizes(newest_path: Path, newest: int) -> dict[int, int | None]:
    """Each run's output size: run N's file sits beside the newest's, in folder N (file I/O)."""
    sizes: dict[int, int | None] = {}
    for run in range(1, newest + 1):
        try:
            sizes[run] = os.stat(run_path(newest_path, run)).st_size
        except OSError:
            sizes[run] = None
    return sizes


async def _run_events(client: Any, session: str) -> list[Event]:
    """The session's runs' starts and ends, page by page (only those kinds: a daemon older
    than the `kinds` argument refuses it, and then every event is read)."""
    found: list[Event] = []
    since = 0
    kinds: dict[str, Any] = {"kinds": RUN_KINDS}
    while True:
        try:
            reply = await client.call(
                "events", session=session, since=since, limit=EVENTS_PAGE, **kinds
            )
        except ApiError as exc:
            if exc.code != "bad-request" or not kinds:
                raise
            kinds = {}
            continue
        page = parse_reply("events", reply)
        found += page
        if len(page) < EVENTS_PAGE:
            return found
        since = page[-1].seq


def rows_of(
    newest: int, sizes: dict[int, int | None] | None, events: list[Event] | None, live: bool
) -> list[RunRow]:
    """The picker's rows, newest first; `sizes` or `events` None: not known yet."""
    started: dict[int, str] = {}
    ended: dict[int, dict[str, Any]] = {}
    for event in events or []:
        if event.run is not None and event.kind == "run-started":
            started[event.run] = event.at
        elif event.run is not None and event.kind == "run-exited":
            ended[event.run] = dict(event.data or {})
    rows = []
    for run in range(newest, 0, -1):
        end = ended.get(run)
        if events is None:
            how, exit_text = PENDING, PENDING
        elif end is not None:
            how = str(end.get("outcome") or "ended")
            code, signal = end.get("exit_code"), end.get("signal")
            exit_text = str(code) if code is not None else str(signal or "-")
        else:
            how = "running" if run == newest and live else "?"
            exit_text = "-"
        start = started.get(run) if events is not None else PENDING
        size = sizes.get(run) if sizes is not None else None
        rows.append(RunRow(run, start, how, exit_text, size, sized=sizes is not None))
    return rows


async def read_runs(client: Any, session: str) -> list[RunRow]:
    """Every run of `session`, newest first. The two questions go to the daemon at once: a
    busy daemon took a second or more for each (issue 13)."""
    found: dict[str, Any] = {}
    failed: list[Exception] = []

    async def ask(what: str, question: Any) -> None:
        try:
            found[what] = await question()
        except (ApiError, OSError) as exc:  # raised below as itself, not in a group
            failed.append(exc)

    async def info_of() -> Any:
        return parse_reply("log_info", await client.call("log_info", name=session))

    async with anyio.create_task_group() as group:
        group.start_soon(ask, "info", info_of)
        group.start_soon(ask, "events", lambda: _run_events(client, session))
    if failed:
        raise failed[0]
    info = found["info"]
    newest = info.current_run or info.run or 0
    if not newest or not info.path:
        return []
    sizes = await anyio.to_thread.run_sync(_sizes, Path(info.path), newest)
    return rows_of(newest, sizes, found["events"], info.live)


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
    """`12-01 16:58:06` of an ISO time; "?" when the start is not known ("…": not yet)."""
    if at == PENDING:
        return PENDING
    return at[5:19].replace("T", " ") if at and len(at) >= 19 else "?"


class RunPicker(ModalScreen[int | None]):
    """Every run of one session; Enter shows the highlighted one, Escape keeps the view."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("q", "cancel", "Cancel", show=False),
        Binding("j", "cursor(1)", "Down", show=False),
        Binding("k", "cursor(-1)", "Up", show=False),
    ]

    def __init__(
        self,
        client: Any,
        session: str,
        shown_run: int | None,
        newest_run: int = 0,
        newest_path: str | None = None,
    ) -> None:
        super().__init__()
        self.client = client
        self.session = session
        self.shown_run = shown_run
        self.newest_run = newest_run
        self.newest_path = newest_path
        """The newest run and its file, as the output view knows them: rows at once."""
        self.rows: list[RunRow] = []
        self.answered = False
        self.problem = ""
        """Why the daemon's answer is missing (shown under the rows)."""
        """The daemon's rows are shown (those of the view are not shown after them)."""

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
        if self.newest_run and self.newest_path:
            self._show(rows_of(self.newest_run, None, None, live=False))
            self._size_known()
        self._read()

    @work(group="known", exit_on_error=False)
    async def _size_known(self) -> None:
        """The sizes of the runs the view knows of, before the daemon answers."""
        path, newest = Path(self.newest_path or ""), self.newest_run
        sizes = await anyio.to_thread.run_sync(_sizes, path, newest)
        if not self.answered:  # the daemon's answer came first: it says more
            self._show(rows_of(newest, sizes, None, live=False))

    @work(group="read", exclusive=True, exit_on_error=False)
    async def _read(self) -> None:
        """Ask for the runs, then list them with the cursor on the run shown now."""
        try:
            rows = await read_runs(self.client, self.session)
        except (ApiError, OSError) as exc:  # the daemon went away: say so in the dialog
            self.problem = f"cannot read the runs' starts and ends: {exc}"
            self._show(self.rows)
            return
        self.answered = True
        self._show(rows)

    def _show(self, rows: list[RunRow]) -> None:
        """List `rows`; the cursor stays on the run it was on, else goes to the run shown."""
        table = self.query_one(DataTable)
        numbers = [row.run for row in rows]
        was = [row.run for row in self.rows]
        on = was[table.cursor_row] if self.rows and table.cursor_row < len(was) else None
        self.rows = rows
        table.clear()
        for row in rows:
            table.add_row(
                str(row.run),
                _short_time(row.started_at),
                inert(row.ended),
                inert(row.exit),
                size_text(row.size_bytes) if row.sized else PENDING,
                key=str(row.run),
            )
        note = self.query_one("#runs-note", Static)
        note.update(self.problem or ("" if rows else "no runs yet"))
        note.display = bool(self.problem) or not rows
        target = on if on in numbers else self.shown_run
        if target in numbers:
            table.move_cursor(row=numbers.index(target), animate=False)

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
