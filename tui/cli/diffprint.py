"""`herd diff`'s text: the stat, then each file's diff in git's colours on a terminal, through
a pager there; every agent-written byte made inert. Without click or pydantic: the full command
line (diffverb.py) and the fast path (fastread.py) print with it."""

from __future__ import annotations

import os
import sys

from agentherd.sessions.diffwords import stat_lines
from agentherd.sessions.sanitize import inert

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing and the models only name types: not imported to run
    from collections.abc import Callable, Iterator
    from typing import Any

    from agentherd.sessions.diffreply import DiffReply

DEFAULT_PAGER = "less -R"
"""The pager when $PAGER is unset: -R lets the colours through."""
_COLOURS = {"+": "\x1b[32m", "-": "\x1b[31m", "@": "\x1b[36m"}
_BOLD, _RESET = "\x1b[1m", "\x1b[0m"


def replies(
    ask: Callable[..., Any],
    name: str,
    checkpoint: str | None,
    against: str,
    texts: bool,
    work: bool,
    path: str | None,
) -> list[Any]:
    """The `diff` replies `herd diff` prints, asked through `ask(**request)`: the uncommitted
    work (when there is any, or with `work`) and the checkpoint (the latest by default)."""
    asked: dict[str, Any] = {"name": name, "against": against, "texts": texts and path is None}
    if path is not None:
        asked["file"] = path
    found: list[Any] = []
    work_reply = None
    if work or checkpoint is None:
        work_reply = ask(work=True, **asked)
        if work or work_reply.files or work_reply.error or not work_reply.checkpoints:
            found.append(work_reply)
    if not work and (checkpoint is not None or (work_reply is not None and work_reply.checkpoints)):
        found.append(ask(checkpoint=checkpoint, **asked))
    return found


def lines(reply: DiffReply, texts: bool, colour: bool) -> Iterator[str]:
    """One reply as the lines printed: the stat, then each file's diff; all of it inert."""
    for number, line in enumerate(stat_lines(reply)):
        yield _BOLD + inert(line) + _RESET if colour and number == 0 else inert(line)
    if not texts:
        return
    for change in reply.files:
        shown = reply.texts.get(change.path)
        if shown is None:
            continue
        yield ""
        for line in shown.text.splitlines():
            yield painted(inert(line), colour)
        if shown.truncated:
            yield f"[{inert(change.path)}: truncated here; the rest of its diff is not shown]"
    if reply.texts_truncated:
        left = len(reply.files) - len(reply.texts)
        yield (
            f"[truncated: {left} more files not shown (the diff passes the reply's bound); "
            f"`herd diff {reply.session} --file PATH` shows one]"
        )
    yield ""


def painted(line: str, colour: bool) -> str:
    """A diff line in git's colours on a terminal: additions green, removals red."""
    if not colour:
        return line
    if line.startswith(("diff --git", "+++", "---", "index ")):
        return _BOLD + line + _RESET
    code = _COLOURS.get(line[:1])
    return code + line + _RESET if code else line


def page(text: str) -> None:
    """Print `text`, through $PAGER (default `less -R`) when stdout is a terminal."""
    if not sys.stdout.isatty():
        sys.stdout.write(text)
        return
    import shlex  # a terminal's person waits on the pager: a script piping it never imports these
    import subprocess

    argv = shlex.split(os.environ.get("PAGER") or DEFAULT_PAGER)
    try:
        pager = subprocess.Popen(argv, stdin=subprocess.PIPE)
    except OSError:
        sys.stdout.write(text)
        return
    assert pager.stdin is not None
    try:
        pager.stdin.write(text.encode("utf-8", "replace"))
        pager.stdin.close()
    except BrokenPipeError:  # the person quit the pager before the end
        pass
    pager.wait()
