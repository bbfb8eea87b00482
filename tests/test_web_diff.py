"""`herd web`'s diff pages: the session page links each checkpoint (and the uncommitted work)
to a page with its files, their +/- and the diff, escaped and bounded as `herd diff` is."""

from __future__ import annotations

import re

import pytest
from conftest import Herd
from test_diff import _three_checkpoints
from test_web import browser, herd_web


@pytest.mark.pidns
def test_a_checkpoints_page_shows_its_files_and_diff_escaped(herd: Herd) -> None:
    repo, shas = _three_checkpoints(herd)
    (repo / "<b>evil\x1b[31m.txt").write_text("<script>alert(1)</script>\n\x1b[2Jwiped\n")
    with herd_web(herd) as base, browser(base) as web:
        session = web.get("/session/api")
        assert session.status_code == 200
        assert f'href="/session/api/diff/{shas[1]}"' in session.text
        assert 'href="/session/api/diff/work"' in session.text
        page = web.get(f"/session/api/diff/{shas[1]}")
        assert page.status_code == 200, page.text
        assert f"checkpoint {shas[1][:7]} &#x27;edit app&#x27; against checkpoint" in page.text
        assert "M app.py  +2 -1" in page.text
        diff = re.search(r'<pre class="diff">(.*?)</pre>', page.text, re.S)
        assert diff and '<span class="del">-b</span>' in diff.group(1), page.text
        assert '<span class="add">+B</span>' in diff.group(1)
        verified = web.get(f"/session/api/diff/{shas[2]}?against=verified")
        assert verified.status_code == 200 and "no checkpoint before it is verified" in (
            verified.text
        )
        work = web.get("/session/api/diff/work")
        assert work.status_code == 200
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in work.text
        assert "<script>alert" not in work.text and "\x1b" not in work.text
        assert "&lt;b&gt;evil^[[31m.txt" in work.text
        missing = web.get("/session/api/diff/deadbeef")
        assert missing.status_code == 404 and "no checkpoint" in missing.text
