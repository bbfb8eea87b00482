"""Scope patterns read as git reads them; paths outside are drift, the plan and progress never."""

from __future__ import annotations

import pytest
from conftest import Herd, make_repo, script, wait_until

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


def test_a_stray_commit_in_a_runs_first_moment_is_out_of_scope_for_every_session_of_an_up(
    herd: Herd,
) -> None:
    """The daemon's first look at git waits for a `herd up` under way: an agent that committed
    before that look had its commit taken for history from before herd watched (no warning)."""
    names = [f"s{number}" for number in range(8)]
    commit_at_once = script("""
        import subprocess, time
        open("stray.txt", "w").write("x")
        subprocess.run(["git", "add", "stray.txt"], check=True)
        subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@b", "commit",
                        "-qm", "stray"], check=True)
        time.sleep(60)
    """)
    sessions = "".join(
        f"""
        [[session]]
        name = "{name}"
        cwd = "{make_repo(herd.root / name)}"
        command = {commit_at_once}
        scope = ["src/**"]
        stop_grace = "1s"
        """
        for name in names
    )
    herd.write(sessions)
    client = herd.start()
    client.call("up")

    def committed() -> bool:
        return all(len(herd.events(name, "checkpoint")) >= 2 for name in names)

    # Eight interpreters and their git, beside a loaded suite: 30 s was once not enough.
    wait_until(committed, 90, "each agent's commit recorded")
    missed = [name for name in names if not herd.events(name, "out-of-scope")]
    assert missed == [], "stray commits taken for history from before herd watched"
    client.call("down", socket_timeout_s=None)
