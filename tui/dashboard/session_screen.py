"""The session screen: one session in tabs (output, progress, plan, checkpoints, events, spend,
report, diff).

It follows one session at a time (`,` and `.` step through the fleet in the fleet's order) and
reads everything through the daemon's API or the files the API names; it holds no state of
the session beyond what it shows. The app keeps one, shown again for the next session
(`reopen`): composing it was most of an open, and a closed one's widgets stayed in Textual's
caches (textual#6665), slowing the garbage collector's full passes with every open.
"""

from __future__ import annotations

from typing import Any, ClassVar, cast

import anyio
from rich.markdown import Markdown
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.lazy import Lazy
from textual.reactive import reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, OptionList, Static, TabbedContent, TabPane

from agentherd.sessions.records import Event
from agentherd.sessions.sanitize import inert
from agentherd.sessions.status import SessionStatus, parse_reply
from agentherd.supervisor.api.protocol import ApiError
from agentherd.tui.dashboard.checkpoints_tab import CheckpointsTab
from agentherd.tui.dashboard.diff_view import DiffView
from agentherd.tui.dashboard.events_tab import EventsTab
from agentherd.tui.dashboard.footer import SessionFooter
from agentherd.tui.dashboard.host import Dashboard, host
from agentherd.tui.dashboard.messages import Loaded
from agentherd.tui.dashboard.output_view import OutputView
from agentherd.tui.dashboard.spend_chart import SpendCharts
from agentherd.tui.dashboard.tabtext import (
    event_line,
    open_warnings,
    plan_lines,
    progress_entries,
    read_progress,
)
from agentherd.tui.dashboard.terminal_tab import TerminalView
from agentherd.tui.render import state_text
from agentherd.tui.spend import usage_money

TABS: tuple[tuple[str, str], ...] = (
    ("output", "Output"),
    ("progress", "Progress"),
    ("plan", "Plan"),
    ("checkpoints", "Checkpoints"),
    ("events", "Events"),
    ("spend", "Spend"),
    ("report", "Report"),
    ("diff", "Diff"),
    ("terminal", "Terminal"),
)
"""Tab id and label, in the order the number keys pick them."""

SPEND_READ_EVERY_S = 5.0
"""The Spend tab asks for new samples this often while it is shown (the daemon samples every
few seconds; a chart a few seconds old reads the same)."""

EVENTS_SHOWN = 2000
"""The events tab shows the session's newest events (the whole log: `herd events`)."""

READING: dict[str, str] = {
    "#progress-text": "reading the progress file…",
    "#plan-text": "reading the plan…",
    "#spend-chart": "reading the spend…",
    "#report-text": "reading the report…",
}
"""What a tab says until its reader answers (a session shown first, or another one)."""

COMPOSED_LATER = ("checkpoints", "events", "diff", "terminal")
"""Tabs composed after the screen's first paint (Textual's `Lazy`) unless the screen opens on
them: composing them first made the app's first open ~20 % slower (issue 26 item 5)."""


class SessionScreen(Screen[None]):
    """Everything herd knows about one session; Escape goes back to the fleet."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="back", tooltip="Back to the fleet"),
        Binding("question_mark", "app.help", "Help", show=True),  # early: 80 columns cut the rest
        *(
            Binding(str(n), f"tab('{tab}')", label, show=False, tooltip=f"The {label} tab")
            for n, (tab, label) in enumerate(TABS, start=1)
        ),
        Binding("comma", "step(-1)", "Prev session", tooltip="The previous session of the fleet"),
        Binding("full_stop", "step(1)", "Next session", tooltip="The next session of the fleet"),
        Binding(
            "F",
            "restart_from",
            "Restart from",
            id="restart-from",
            tooltip="Restart from the checkpoint under the cursor (Checkpoints tab; asks first)",
        ),
        Binding(
            "d",
            "diff",
            "Diff",
            id="diff",
            tooltip="What the agent changed: the Diff tab (on the Checkpoints tab: that one's)",
        ),
        Binding(
            "b",
            "against",
            "Base",
            show=False,
            tooltip="Diff tab: against the previous checkpoint, or the last verified one",
        ),
        Binding("j", "move(1)", "Down", show=False, tooltip="Down a line, or the next checkpoint"),
        Binding("k", "move(-1)", "Up", show=False, tooltip="Up a line, or the previous checkpoint"),
        Binding("ctrl+r", "reload", "Reload", show=False, tooltip="Read the tabs again"),
        Binding("O", "order", "Order", show=False, tooltip="Progress: newest first or last"),
        *OutputView.KEYS,
    ]

    session: reactive[str] = reactive("", init=False)
    newest_first: reactive[bool] = reactive(True)

    def __init__(self, session: str, tab: str = "output") -> None:
        super().__init__()
        self.set_reactive(SessionScreen.session, session)
        self.first_tab = tab
        self.status: SessionStatus | None = None
        self.report: dict[str, Any] = {}
        self.progress_text = ""
        self.checkpoints_tab = CheckpointsTab()
        self.events_tab = EventsTab(EVENTS_SHOWN)
        self.diff_view = DiffView(id="diff-view")
        self.terminal_view = TerminalView(id="terminal-view")
        self.samples: list[list[Any]] | None = None
        """The `spend` op's samples; None until read (or when no daemon keeps them)."""
        self._seen: tuple[object, ...] = ()

    @property
    def checkpoints(self) -> list[dict[str, Any]]:
        """The session's checkpoints as the Checkpoints tab lists them, newest first."""
        return self.checkpoints_tab.checkpoints or []

    @property
    def herd(self) -> Dashboard:
        """The app, as a screen sees it."""
        return host(self.app)

    def compose(self) -> ComposeResult:
        """The session's headline, the tabs, the keys."""
        yield Static("", id="session-head", markup=False)
        with TabbedContent(initial=self.first_tab):
            with TabPane("Output", id="output"):
                yield OutputView(id="output-view")
            with TabPane("Progress", id="progress"), VerticalScroll():
                yield Static(READING["#progress-text"], id="progress-text", markup=False)
            with TabPane("Plan", id="plan"), VerticalScroll():
                yield Static(READING["#plan-text"], id="plan-text", markup=False)
            with TabPane("Checkpoints", id="checkpoints"):
                yield self._later("checkpoints", self.checkpoints_tab)
            with TabPane("Events", id="events"):
                yield self._later("events", self.events_tab)
            with TabPane("Spend", id="spend"), VerticalScroll():
                yield Static(READING["#spend-chart"], id="spend-chart", markup=False)
            with TabPane("Report", id="report"), VerticalScroll():
                yield Static(READING["#report-text"], id="report-text", markup=False)
            with TabPane("Diff", id="diff"):
                yield self._later("diff", self.diff_view)
            with TabPane("Terminal", id="terminal"):
                yield self._later("terminal", self.terminal_view)
        yield SessionFooter()

    def _later(self, tab: str, content: Widget) -> Widget:
        """A tab's content, composed after the first paint unless the screen opens on it."""
        return content if tab == self.first_tab or tab not in COMPOSED_LATER else Lazy(content)

    def on_mount(self) -> None:
        """Read everything."""
        self.show_status(self.herd.status_of(self.session))
        for footer in self.query(SessionFooter):
            footer.follow()  # its keys act on the new session: its name and state
        self._load()
        self.set_interval(SPEND_READ_EVERY_S, self._spend_if_shown)

    # ----- loading --------------------------------------------------------------------------

    def reopen(self, session: str, tab: str) -> None:
        """Shown again, on `session` at `tab`: every tab read afresh."""
        self.action_tab(tab)
        if session != self.session:
            self.session = session
            return
        self._seen = ()
        self.show_status(self.herd.status_of(session))
        self._load()

    def on_screen_suspend(self) -> None:
        """Closed (not merely under a dialog): nothing is followed until it is shown again."""
        if self in self.app.screen_stack:
            return
        for group in ("read", "spend"):
            self.workers.cancel_group(self, group)
        self.query_one(OutputView).follow(None)
        self.terminal_view.follow("")

    def watch_session(self) -> None:
        """Another session: start over on every tab, blank until read."""
        self._seen = ()
        self.samples = None
        self.report, self.progress_text = {}, ""
        for selector, text in READING.items():
            self.query_one(selector, Static).update(text)
        self.events_tab.show([], "")
        self.checkpoints_tab.show(None)
        self.show_status(self.herd.status_of(self.session))
        self._load()
        if self.query_one(TabbedContent).active == "diff":
            self.diff_view.show(self.session)

    def _load(self) -> None:
        """Follow the output and read the other tabs."""
        self._follow()
        self._read()

    def _follow(self) -> None:
        self.query_one(OutputView).follow(self.session)
        self.terminal_view.follow(self.session)

    @work(group="read", exclusive=True, exit_on_error=False)
    async def _read(self) -> None:
        """The report (plan, checkpoints), the events and the progress file."""
        name, client = self.session, self.herd.client
        info = parse_reply("log_info", await client.call("log_info", name=name))
        text = await anyio.to_thread.run_sync(read_progress, info.progress)
        self.post_message(Loaded(name, "progress", text))
        events: list[Event] = []
        since = 0
        while True:
            page = parse_reply("events", await client.call("events", session=name, since=since))
            events = (events + page)[-EVENTS_SHOWN:]
            if len(page) < 1000:
                break
            since = page[-1].seq
        self.post_message(Loaded(name, "events", events))
        await self._read_spend()
        reply = parse_reply("report", await client.call("report", name=name))
        self.post_message(Loaded(name, "report", reply))

    async def _read_spend(self) -> None:
        """The session's spend samples (kept by the daemon; a fleet on disk has none)."""
        name = self.session
        try:
            reply = parse_reply("spend", await self.herd.client.call("spend", name=name))
        except ApiError as exc:
            why = exc.message
            if self.herd.read_only:
                why = "the daemon keeps the samples while it runs, and none runs here"
            self.post_message(Loaded(name, "spend", f"{why} (the Report tab has the totals)"))
            return
        self.post_message(Loaded(name, "spend", reply.samples))

    @work(group="spend", exclusive=True, exit_on_error=False)
    async def _refresh_spend(self) -> None:
        """Newer samples, in a worker of their own (the other tabs need not be read again)."""
        await self._read_spend()

    @on(TabbedContent.TabActivated)
    def _tab_shown(self, event: TabbedContent.TabActivated) -> None:
        """The tab's content takes the keys (arrows, j/k move the checkpoint cursor or scroll:
        seen in tmux, after `4` they still went to the tab bar and F took the first
        checkpoint); the Spend tab draws what it has and asks for newer samples."""
        target = {
            "output": "#run-output",
            "checkpoints": "#checkpoint-table",
            "events": "#event-log",
            "diff": "#diff-files",
            "terminal": "#terminal-view",
        }.get(str(event.pane.id), "VerticalScroll")
        self._focus_in(event.pane, target)
        if event.pane.id == "spend":
            self._show_spend()
            self._spend_if_shown()
        if event.pane.id == "diff":  # read only when looked at: git runs for it
            self.diff_view.show(self.session)

    def _focus_in(self, pane: TabPane, target: str, again: bool = True) -> None:
        """Focus the tab's content, if the tab is still in front (a late event must not pull
        back); a tab composed later is focused after the paint that mounts it."""
        if pane.id != self.query_one(TabbedContent).active:
            return
        for widget in pane.query(target).results():
            widget.focus()
            return
        if again:
            self.call_after_refresh(self._focus_in, pane, target, False)

    def _spend_if_shown(self) -> None:
        """Fresh samples while the Spend tab is in front."""
        if self.query_one(TabbedContent).active == "spend" and self.app.screen is self:
            self._refresh_spend()

    def show_status(self, status: SessionStatus | None) -> None:
        """The newest status of this session: the headline; tabs are read again on a change."""
        self.status = status
        if not self.query("#session-head"):
            return  # not composed yet, or closing
        if status is None:
            self.query_one("#session-head", Static).update(f"{self.session}: not in herd.toml")
            return
        view = self.query_one(OutputView)
        view.latest_run = status.run or 0
        plan = f"plan {status.plan.passing}/{status.plan.total}" if status.plan else "no plan"
        warnings = f"  ⚠{len(status.warnings)}" if status.warnings else ""
        known = status.usage is not None and (
            status.usage.cost_usd is not None or status.usage.cost_unpriced_model is not None
        )
        spend = f"  {usage_money(status.usage)}" if known else ""
        head = (  # the state and its warnings first: a narrow terminal cuts the end
            f"{status.session}  {state_text(status)}{warnings}  ·  {plan}"
            f"  ·  run {status.run or '-'}{spend}  ·  {status.handle or 'no task'}"
        )
        self.query_one("#session-head", Static).update(head)
        self._show_spend()
        checkpoint = status.checkpoint
        seen = (
            status.state,
            status.run,
            checkpoint.sha if checkpoint else None,
            checkpoint.verified if checkpoint else None,
            status.plan.passing if status.plan else None,
            len(status.warnings),
        )
        if self._seen and seen != self._seen:
            self._read()
            if self.query_one(TabbedContent).active == "diff":
                self.diff_view.show(self.session)
        self._seen = seen

    # ----- what the readers found -----------------------------------------------------------

    def on_loaded(self, message: Loaded) -> None:
        """Fill the tab a reader finished, if it is still about this session."""
        if message.session != self.session or not self.query("#report-text"):
            return
        if message.what == "progress":
            self.progress_text = str(message.value)
            self._show_progress()
        elif message.what == "spend":
            if isinstance(message.value, str):
                self.query_one("#spend-chart", Static).update(
                    f"no spend over time: {message.value}"
                )
                return
            self.samples = cast("list[list[Any]]", message.value)
            self._show_spend()
        elif message.what == "events":
            self._show_events(cast("list[Event]", message.value))
        elif message.what == "report":
            reply = cast(Any, message.value)
            self.report = reply.report
            self.query_one("#report-text", Static).update(Markdown(reply.markdown))
            self.query_one("#plan-text", Static).update(plan_lines(self.report, self.status))
            self._show_checkpoints()

    def _show_spend(self) -> None:
        """Draw the charts, only while the tab is in front (snapshots come four times a second)."""
        shown = self.query_one(TabbedContent).active == "spend"
        if shown and self.samples is not None:
            self.query_one("#spend-chart", Static).update(SpendCharts(self.samples, self.status))

    def _show_progress(self) -> None:
        entries = progress_entries(self.progress_text)
        if self.newest_first:
            entries.reverse()
        order = "newest first" if self.newest_first else "newest last"
        text = "\n\n".join(inert(entry) for entry in entries) or "the progress file is empty"
        self.query_one("#progress-text", Static).update(f"({order}; O flips)\n\n{text}")

    def watch_newest_first(self, newest_first: bool) -> None:
        """Show the newest entry: at the top, or at the end (scrolled to)."""
        if self.is_mounted:
            self._show_progress()
            scroll = self.query_one("#progress-text").parent
            if isinstance(scroll, VerticalScroll):
                if newest_first:
                    scroll.scroll_home(animate=False)
                else:
                    scroll.call_after_refresh(scroll.scroll_end, animate=False)

    def _show_events(self, events: list[Event]) -> None:
        self.events_tab.show([event_line(event) for event in events], open_warnings(self.status))

    def _show_checkpoints(self) -> None:
        self.checkpoints_tab.show(self.report.get("changed", {}).get("checkpoints", []))

    # ----- actions --------------------------------------------------------------------------

    def action_back(self) -> None:
        """Back to the fleet, its cursor on this session."""
        self.herd.select(self.session)
        self.dismiss(None)

    def action_tab(self, tab: str) -> None:
        """Show one tab."""
        self.query_one(TabbedContent).active = tab

    def action_step(self, step: int) -> None:
        """The previous or next session, in the fleet's order."""
        order = self.herd.shown_names()
        if self.session in order and order:
            self.session = order[(order.index(self.session) + step) % len(order)]

    def action_view(self, action: str, *args: int) -> None:
        """An output-tab key: shows the output tab and hands the key to its view (the Diff
        tab searches its own text with the same keys)."""
        tabs = self.query_one(TabbedContent)
        if tabs.active == "diff" and action in ("search", "next_match"):
            getattr(self.diff_view, f"action_{action}")(*args)
            return
        if tabs.active != "output":
            tabs.active = "output"
        getattr(self.query_one(OutputView), f"action_{action}")(*args)

    def action_move(self, step: int) -> None:
        """j/k: the checkpoint cursor, or scroll the tab in front by a line."""
        focused = self.focused
        if isinstance(focused, OptionList):
            (focused.action_cursor_down if step > 0 else focused.action_cursor_up)()
        elif isinstance(focused, DataTable):
            focused.move_cursor(row=max(0, focused.cursor_row + step))
        elif focused is not None:
            if step > 0:
                focused.scroll_down(animate=False)
            else:
                focused.scroll_up(animate=False)

    def action_reload(self) -> None:
        """Read every tab again."""
        self._load()

    def action_diff(self) -> None:
        """The Diff tab; from the Checkpoints tab, on the checkpoint under the cursor."""
        tabs = self.query_one(TabbedContent)
        checkpoint = self.checkpoints_tab.selected() if tabs.active == "checkpoints" else None
        view = self.diff_view
        if checkpoint is not None:
            view.session, view.target = self.session, checkpoint["sha"]
        if tabs.active == "diff":
            view.show(self.session)
        tabs.active = "diff"

    def action_against(self) -> None:
        """The Diff tab's base: the previous checkpoint, or the last verified one."""
        if self.query_one(TabbedContent).active == "diff":
            self.diff_view.toggle_against()

    def action_order(self) -> None:
        """Progress newest first, or newest last."""
        self.newest_first = not self.newest_first

    def action_restart_from(self) -> None:
        """Restart from the highlighted checkpoint, after a confirmation that names it."""
        checkpoint = self.checkpoints_tab.selected()
        if checkpoint is None or self.query_one(TabbedContent).active != "checkpoints":
            self.notify("pick a checkpoint in the Checkpoints tab (4) first", markup=False)
            return
        self.herd.restart_from(self.session, checkpoint["sha"])
