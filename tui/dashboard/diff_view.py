"""The session screen's Diff tab: a checkpoint picker (the uncommitted work, then the
checkpoints newest first), the files it changed with their +/-, and one file's diff in colour,
scrolled and searched. Each file's text is asked for when its row is highlighted, and coloured
in a worker thread: a diff of thousands of files costs the ones looked at."""

from __future__ import annotations

from typing import Any

import anyio
from rich.syntax import Syntax
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from agentherd.sessions.diffreply import DiffReply, DiffText
from agentherd.sessions.diffwords import VERIFIED_MARKS, file_line, heading
from agentherd.sessions.sanitize import inert
from agentherd.sessions.status import parse_reply
from agentherd.supervisor.api.protocol import ApiError
from agentherd.tui.dashboard.diff_lines import DiffLines
from agentherd.tui.dashboard.host import host

WORK = "work"
"""The picker's id of the uncommitted work."""
DIFF_THEME = "ansi_dark"
"""Pygments' diff lexer in the terminal's own colours: additions green, removals red."""


class DiffListed(Message):
    """A diff's file list was read (or could not be: `why`)."""

    def __init__(self, session: str, reply: DiffReply | None, why: str = "") -> None:
        super().__init__()
        self.session, self.reply, self.why = session, reply, why


class DiffRead(Message):
    """One file's text, coloured, a Text per line."""

    def __init__(self, session: str, path: str, lines: list[Text]) -> None:
        super().__init__()
        self.session, self.path, self.lines = session, path, lines


def coloured(shown: DiffText) -> list[Text]:
    """A file's diff text made inert and coloured, a Text per line (in a worker thread)."""
    plain = inert(shown.text).rstrip("\n")
    if shown.truncated:
        plain += "\n[truncated here: the rest of this file's diff is not shown]"
    text = Syntax(plain, "diff", theme=DIFF_THEME, background_color="default").highlight(plain)
    text.expand_tabs(8)  # a tab would move the terminal's cursor, not draw cells
    return list(text.split("\n", allow_blank=True))


class DiffView(Vertical):
    """What one session's agent changed, per checkpoint or in the uncommitted work."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.session = ""
        self.against = "previous"
        self.target: str | None = None
        """The picked checkpoint's sha, WORK, or None for the default (the latest)."""
        self.reply: DiffReply | None = None
        self.lines: list[str] = []
        """The shown file's lines as plain text, for the search."""
        self.match_line = -1
        self.query_text = ""
        self.wanted: str | None = None
        """A session asked for before this view was mounted (the session screen composes the
        Diff tab after its first paint): read once it is."""
        self.ready = False
        """Mounted: its parts can be drawn (Textual's `is_mounted` is still False in
        `on_mount`)."""

    def compose(self) -> ComposeResult:
        """The heading, the picker and files beside the diff, the search line."""
        yield Static("reading the diff…", id="diff-head", markup=False)
        with Horizontal(id="diff-body"):
            with Vertical(id="diff-side"):
                yield OptionList(id="diff-picker")
                yield OptionList(id="diff-files")
            yield DiffLines(id="diff-text")
        yield Input(placeholder="search the diff (Enter; n/N next/previous)", id="diff-search")

    def on_mount(self) -> None:
        self.query_one("#diff-search", Input).display = False
        self.query_one("#diff-picker").border_title = "diff of (Enter picks)"
        self.query_one("#diff-files").border_title = "files (j/k)"
        self.ready = True
        if self.wanted is not None:
            self.show(self.wanted)

    def show(self, session: str) -> None:
        """Read the session's diff (again): the picked checkpoint, else the latest."""
        if not self.ready:
            self.wanted = session
            return
        self.wanted = None
        if session != self.session:  # blank at once: no other session's diff stays shown
            self.session, self.target, self.reply = session, None, None
            self.query_one("#diff-head", Static).update("reading the diff…")
            self.query_one("#diff-picker", OptionList).clear_options()
            self.query_one("#diff-files", OptionList).clear_options()
            self._set_lines([])
        self._read_list(session, self.target, self.against)

    def toggle_against(self) -> None:
        """Against the previous checkpoint, or the last verified one."""
        self.against = "verified" if self.against == "previous" else "previous"
        self.show(self.session)

    # ----- reading (workers on the event loop; git runs in the daemon's thread) -----------

    @work(group="diff-list", exclusive=True, exit_on_error=False)
    async def _read_list(self, session: str, target: str | None, against: str) -> None:
        where: dict[str, Any] = {"work": True} if target == WORK else {"checkpoint": target}
        client = host(self.app).client
        try:
            found = await client.call("diff", name=session, against=against, **where)
            reply: DiffReply = parse_reply("diff", found)
            if target is None and not reply.checkpoints:  # nothing committed: the work
                reply = parse_reply("diff", await client.call("diff", name=session, work=True))
        except ApiError as exc:
            self.post_message(DiffListed(session, None, exc.message))
            return
        self.post_message(DiffListed(session, reply))

    @work(group="diff-file", exclusive=True, exit_on_error=False)
    async def _read_file(self, session: str, reply: DiffReply, path: str) -> None:
        where: dict[str, Any] = {"work": True} if reply.work else {}
        if reply.target is not None:
            where["checkpoint"] = reply.target.sha
        client = host(self.app).client
        try:
            found = await client.call(
                "diff", name=session, against=reply.against, file=path, **where
            )
        except ApiError as exc:
            self.post_message(DiffRead(session, path, [Text(exc.message)]))
            return
        shown = parse_reply("diff", found).texts.get(path) or DiffText(text="(no text)")
        lines = await anyio.to_thread.run_sync(coloured, shown)
        self.post_message(DiffRead(session, path, lines))

    # ----- what the readers found ------------------------------------------------------------

    def on_diff_listed(self, message: DiffListed) -> None:
        if message.session != self.session:
            return
        head = self.query_one("#diff-head", Static)
        files = self.query_one("#diff-files", OptionList)
        files.clear_options()
        self.reply = message.reply
        if message.reply is None:
            head.update(f"no diff: {message.why}")
            self._set_lines([])
            return
        reply = message.reply
        count = f"{len(reply.files)} file(s), +{reply.added} -{reply.removed}"
        said = f"  ·  {reply.error}" if reply.error else ""
        head.update(inert(f"{heading(reply)}  ·  {count}{said}  (b: against {_other(reply)})"))
        self._fill_picker(reply)
        files.add_options([Option(inert(file_line(f)), id=f.path) for f in reply.files])
        if reply.files:
            files.highlighted = 0
        else:
            self._set_lines([Text("no changes")])

    def _fill_picker(self, reply: DiffReply) -> None:
        picker = self.query_one("#diff-picker", OptionList)
        picker.clear_options()
        picker.add_option(Option("uncommitted work", id=WORK))
        for checkpoint in reply.checkpoints:
            mark = VERIFIED_MARKS[checkpoint.verified]
            label = f"{mark} {checkpoint.short} {inert(checkpoint.subject)}"
            picker.add_option(Option(label[:60], id=checkpoint.sha))
        shown = WORK if reply.work else reply.target.sha if reply.target else None
        if shown is not None:
            picker.highlighted = picker.get_option_index(shown)

    def on_diff_read(self, message: DiffRead) -> None:
        files = self.query_one("#diff-files", OptionList)
        option = files.highlighted_option
        if message.session == self.session and option is not None and option.id == message.path:
            self._set_lines(message.lines)

    def _set_lines(self, lines: list[Text]) -> None:
        self.lines, self.match_line = [line.plain for line in lines], -1
        self.query_one(DiffLines).set_lines(lines)

    @on(OptionList.OptionHighlighted, "#diff-files")
    def _file_picked(self, event: OptionList.OptionHighlighted) -> None:
        if self.reply is not None and event.option.id is not None:
            self._read_file(self.session, self.reply, event.option.id)

    @on(OptionList.OptionSelected, "#diff-picker")
    def _checkpoint_picked(self, event: OptionList.OptionSelected) -> None:
        self.target = event.option.id
        self._read_list(self.session, self.target, self.against)

    # ----- search --------------------------------------------------------------------------

    def action_search(self) -> None:
        """Open the search line."""
        field = self.query_one("#diff-search", Input)
        field.display = True
        field.focus()

    @on(Input.Submitted, "#diff-search")
    def _search(self, event: Input.Submitted) -> None:
        self.query_text = event.value.strip().lower()
        event.input.display = False
        self.query_one(DiffLines).focus()
        self.match_line = -1
        self.action_next_match(1)

    def action_next_match(self, step: int) -> None:
        """The next (or previous) line holding the searched text, highlighted and scrolled to."""
        if not self.query_text or not self.lines:
            return
        count = len(self.lines)
        start = self.match_line if self.match_line >= 0 else (-1 if step > 0 else count)
        for offset in range(1, count + 1):
            index = (start + step * offset) % count
            if self.query_text in self.lines[index].lower():
                self._show_match(index)
                return
        self.app.notify(f"no {self.query_text!r} in this file's diff", markup=False)

    def _show_match(self, index: int) -> None:
        self.match_line = index
        self.query_one(DiffLines).mark(index)


def _other(reply: DiffReply) -> str:
    """The base `b` switches to."""
    return "the last verified checkpoint" if reply.against == "previous" else "the previous one"
