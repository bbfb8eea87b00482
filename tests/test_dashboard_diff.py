"""The session screen's Diff tab, driven by Pilot against a real daemon on a real repository
whose commits the daemon recorded as checkpoints: `d` opens it on the latest checkpoint, the
picker picks another and the uncommitted work, a file's diff shows in colour and is searched."""

from __future__ import annotations

import pytest
from conftest import Herd
from test_dashboard import until
from test_diff import _three_checkpoints
from test_session_tabs import open_session
from textual.widgets import DataTable, OptionList, TabbedContent

from agentherd.tui.dashboard.app import HerdApp
from agentherd.tui.dashboard.diff_lines import DiffLines
from agentherd.tui.dashboard.diff_view import WORK, DiffView


@pytest.fixture
def anyio_backend() -> str:
    """Textual runs on asyncio."""
    return "asyncio"


def _file_ids(view: DiffView) -> list[str]:
    files = view.query_one("#diff-files", OptionList)
    return [str(files.get_option_at_index(i).id) for i in range(files.option_count)]


@pytest.mark.anyio
async def test_d_shows_what_each_checkpoint_and_the_work_changed(herd: Herd) -> None:
    repo, shas = _three_checkpoints(herd)
    (repo / "evil\x1b[31m.txt").write_text("\x1b]0;owned\x07 hello\n")
    app = HerdApp(herd.daemon.socket_path)  # type: ignore[union-attr]
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_session(pilot, app, "api")
        await pilot.press("d")
        assert screen.query_one(TabbedContent).active == "diff"
        view = screen.query_one(DiffView)
        await until(pilot, lambda: view.reply is not None, "the latest checkpoint's diff")
        assert view.reply is not None and view.reply.target is not None
        assert view.reply.target.sha == shas[2]
        assert _file_ids(view) == ["blob.bin", "new.txt"]
        await until(pilot, lambda: any("Binary files" in x for x in view.lines), "the blob")
        # The picker: the work first, then the checkpoints newest first; Enter picks one.
        picker = view.query_one("#diff-picker", OptionList)
        ids = [str(picker.get_option_at_index(i).id) for i in range(picker.option_count)]
        assert ids == [WORK, shas[2], shas[1], shas[0]]
        picker.focus()
        picker.highlighted = 2
        await pilot.press("enter")
        await until(pilot, lambda: _file_ids(view) == ["app.py"], "the second checkpoint")
        await until(pilot, lambda: "+B" in view.lines, "app.py's diff")
        assert "-b" in view.lines and view.lines[0].startswith("diff --git a/app.py")
        # Search with the output's keys: / then Enter, n for the next match.
        await pilot.press("slash", "plus", "enter")
        await until(pilot, lambda: view.match_line >= 0, "a match")
        first = view.match_line
        assert view.lines[first].startswith("+")
        await pilot.press("n")
        await until(pilot, lambda: view.match_line != first, "the next match")
        assert screen.query_one(TabbedContent).active == "diff", "search stays on the diff"
        # The uncommitted work: an untracked file whose name and text hold escapes, inert.
        picker.focus()
        picker.highlighted = 0
        await pilot.press("enter")
        await until(pilot, lambda: view.reply is not None and view.reply.work, "the work")
        await until(pilot, lambda: any("hello" in x for x in view.lines), "the untracked file")
        assert not any("\x1b" in x or "\x07" in x for x in view.lines)
        drawn = view.query_one(DiffLines)
        assert not any("\x1b" in line.plain or "\x07" in line.plain for line in drawn.lines)
        head = str(view.query_one("#diff-head").render())
        assert "uncommitted work against HEAD" in head
        # b: against the last verified checkpoint (none here: from before the first).
        picker.highlighted = 1
        await pilot.press("enter")
        await until(pilot, lambda: view.reply is not None and not view.reply.work, "latest")
        await pilot.press("b")
        await until(pilot, lambda: view.reply is not None and view.reply.against == "verified", "b")
        assert "no checkpoint before it is verified" in view.reply.base_label
        assert set(_file_ids(view)) == {"app.py", "blob.bin", "new.txt"}
        # From the Checkpoints tab, d shows the checkpoint under the cursor.
        await pilot.press("4")
        await until(pilot, lambda: len(screen.checkpoints) == 3, "the checkpoints")
        table = screen.query_one("#checkpoint-table", DataTable)
        table.focus()
        table.move_cursor(row=2)
        await pilot.pause()
        await pilot.press("d")
        await until(
            pilot,
            lambda: view.reply is not None and view.reply.target is not None
            and view.reply.target.sha == shas[0],
            "the oldest checkpoint's diff",
        )  # fmt: skip
        assert set(_file_ids(view)) == {"app.py", "old.txt"}


@pytest.mark.anyio
async def test_a_long_diff_draws_only_the_lines_on_screen() -> None:
    """A file's diff at the 256 KiB bound: set, scrolled to a match, only what is seen is drawn
    (the whole text through one Static took 1.4 s of the event loop; this takes ~0.06 s)."""
    from textual.app import App, ComposeResult

    from agentherd.sessions.diffreply import DiffText
    from agentherd.tui.dashboard.diff_view import coloured

    line = "+    writer.writerow([invoice.id,\tinvoice.amount])  # \x1b[2J\n"
    lines = coloured(DiffText(text="@@ -1 +1 @@\n" + line * (256 * 1024 // len(line))))

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield DiffLines()

    app = One()
    async with app.run_test(size=(100, 30)) as pilot:
        view = app.query_one(DiffLines)
        view.set_lines(lines)
        await pilot.pause()
        assert 0 < len(view._strips) <= 30, "only the visible lines were drawn"
        view.mark(3000)
        await pilot.pause()
        assert view.scroll_offset.y == 3000 - 3
        assert len(view._strips) <= 60
        assert "\t" not in lines[1].plain and "^[[2J" in lines[1].plain
