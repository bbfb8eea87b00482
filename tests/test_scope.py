"""Scope patterns read as git reads them; paths outside are drift, the plan and progress never."""

from __future__ import annotations

import pytest

from agentherd.sessions.scope import in_scope, outside


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("src/**", "src/a.py", True),
        ("src/**", "src/deep/er/b.py", True),
        ("src/**", "tests/a.py", False),
        ("src/**", "other/src/a.py", False),
        ("*.md", "README.md", True),
        ("*.md", "docs/guide.md", True),
        ("*.md", "README.mdx", False),
        ("/Makefile", "Makefile", True),
        ("/Makefile", "sub/Makefile", False),
        ("docs/", "docs/a/b.txt", True),
        ("tests/test_*.py", "tests/test_api.py", True),
        ("tests/test_*.py", "tests/unit/test_api.py", False),
        ("**/migrations/*.sql", "db/migrations/001.sql", True),
        ("**/migrations/*.sql", "migrations/001.sql", True),
        ("src/?.py", "src/a.py", True),
        ("src/[ab].py", "src/c.py", False),
        ("src", "src/x.py", True),
    ],
)
def test_patterns(pattern: str, path: str, expected: bool) -> None:
    assert in_scope(path, [pattern]) is expected


def test_outside_lists_drift_but_never_the_plan_or_progress() -> None:
    paths = ["src/a.py", "infra/prod.tf", "feature_list.json", "claude-progress.txt"]
    assert outside(
        paths, ["src/**", "tests/**"], always=["feature_list.json", "claude-progress.txt"]
    ) == ["infra/prod.tf"]
    assert outside(paths, []) == [], "no scope, no drift"
