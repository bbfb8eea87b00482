"""A checkpoint's page (or the uncommitted work's): the files it changed with their +/-, then
each file's diff, escaped, as bounded as `herd diff` (the daemon cuts the texts)."""

from __future__ import annotations

from urllib.parse import quote

from agentherd.sessions.diffreply import DiffReply
from agentherd.sessions.diffwords import VERIFIED_MARKS, file_line, heading
from agentherd.tui.web.fleetpage import session_href
from agentherd.tui.web.layout import Writer, page, section

WORK = "work"
"""The path segment of the uncommitted work's page, where a checkpoint's sha would be."""
PICKER_SHOWN = 30
_LINE_CLASS = {"+": "add", "-": "del", "@": "hunk"}


def diff_href(name: str, checkpoint: str, against: str = "previous") -> str:
    """`/session/NAME/diff/SHA` (or `.../diff/work`), with `?against=verified` when asked."""
    query = "?against=verified" if against == "verified" else ""
    return f"{session_href(name)}/diff/{quote(checkpoint, safe='')}{query}"


def _diff_lines(text: str, esc: Writer) -> str:
    """A file's diff text, each line escaped and classed by its first character."""
    out = []
    for line in text.splitlines():
        head = line.startswith(("diff --git", "+++", "---"))
        kind = "head" if head else _LINE_CLASS.get(line[:1])
        escaped = esc(line)
        out.append(f'<span class="{kind}">{escaped}</span>\n' if kind else f"{escaped}\n")
    return "".join(out)


def _picker(reply: DiffReply, shown: str, esc: Writer) -> str:
    """Links to the work's page and to each checkpoint's, newest first; the other base."""
    name = reply.session
    items = [f'<li><a href="{esc(diff_href(name, WORK, reply.against))}">uncommitted work</a></li>']
    for checkpoint in reply.checkpoints[:PICKER_SHOWN]:
        counts = ""
        if checkpoint.insertions is not None:
            counts = f" +{checkpoint.insertions} -{checkpoint.deletions or 0}"
        mark = VERIFIED_MARKS[checkpoint.verified].strip() + " "
        label = f"{mark}{checkpoint.short} {checkpoint.subject}{counts}"
        href = diff_href(name, checkpoint.sha, reply.against)
        current = ' aria-current="page"' if checkpoint.sha == shown else ""
        items.append(f'<li><a href="{esc(href)}"{current}>{esc(label)}</a></li>')
    other = "verified" if reply.against == "previous" else "previous"
    target = reply.target.sha if reply.target else WORK
    switch = (
        f'<p><a href="{esc(diff_href(name, target, other))}">against the '
        f"{'last verified' if other == 'verified' else 'previous'} checkpoint instead</a></p>"
    )
    return section("checkpoints", f'<ul class="checkpoints">{"".join(items)}</ul>{switch}')


def diff_page(reply: DiffReply, esc: Writer) -> str:
    """The whole page: the heading, the files with +/-, then each file's text."""
    name = reply.session
    files = [
        f'<li><a href="#f{n}">{esc(file_line(change))}</a></li>'
        for n, change in enumerate(reply.files)
    ]
    if reply.files_truncated:
        files.append("<li>… more files changed (truncated: the list stops here)</li>")
    summary = (
        f"<p>{len(reply.files)} file(s) changed, +{reply.added} -{reply.removed}</p>"
        if reply.files
        else "<p>no changes</p>"
    )
    parts = [
        f'<header><p><a href="{esc(session_href(name))}">← {esc(name)}</a></p>'
        f"<h1>{esc(heading(reply))}</h1></header><main>",
    ]
    if reply.error:
        parts.append(f'<p class="lost">cannot read this diff: {esc(reply.error)}</p>')
    parts.append(section("files", f'{summary}<ul class="files">{"".join(files)}</ul>'))
    for n, change in enumerate(reply.files):
        shown = reply.texts.get(change.path)
        if shown is None:
            body = "<p>not shown: the page's bound was reached (`herd diff --file` shows it)</p>"
        else:
            body = f'<pre class="diff">{_diff_lines(shown.text, esc)}</pre>'
            if shown.truncated:
                body += "<p>truncated here: the rest of this file's diff is not shown</p>"
        # Not `section`: a file's name is the agent's text, so it goes through `esc`.
        parts.append(f'<section id="f{n}"><h2>{esc(change.path)}</h2>\n{body}\n</section>')
    parts.append(_picker(reply, reply.target.sha if reply.target else WORK, esc))
    parts.append("</main>")
    return page(f"herd: {name} diff", "\n".join(parts), live=False)
