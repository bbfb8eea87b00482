"""herd.toml committed in the agent's own worktree (cwd = "."): a crash leaves it alone.

`herd init` writes herd.toml where the person works, and people commit it. The rescue after a
crash once recorded it as deleted (so restoring the rescue deleted the config, and a clean tree
got a "rescue" of its own), and the reset threw away the person's uncommitted edit of it.
"""

from __future__ import annotations

import pytest
from conftest import Herd, git, make_repo, script, wait_until


@pytest.mark.timeout(60)
def test_a_crash_rescues_the_agents_work_and_leaves_a_committed_herd_toml_alone(
    herd: Herd,
) -> None:
    go, ran = herd.root.parent / "go", herd.root.parent / "ran"
    agent = script(f"""
        import pathlib, sys, time
        ran = pathlib.Path({str(ran)!r})
        if ran.exists():
            sys.exit(0)  # the run after the crash: done
        ran.write_text("x")
        pathlib.Path("work.txt").write_text("the agent's work\\n")
        while not pathlib.Path({str(go)!r}).exists():
            time.sleep(0.02)
        sys.exit(3)
    """)
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "."
        command = {agent}
        restart_delay = 0
    """)
    make_repo(herd.root, {"README.md": "hello\n", "herd.toml": herd.config_path.read_text()})
    committed = git(herd.root, "rev-parse", "HEAD").strip()
    client = herd.start()
    client.call("start", name="api")
    wait_until(lambda: (herd.root / "work.txt").exists(), what="the agent's work")
    edited = herd.config_path.read_text() + "# the person's edit, not committed\n"
    herd.config_path.write_text(edited)
    go.write_text("crash now")

    herd.wait_state("api", "completed", timeout_s=30)
    (rescue,) = herd.events("api", "rescue-saved")
    changed = git(herd.root, "diff", "--name-only", committed, rescue["data"]["ref"])
    assert changed.split() == ["work.txt"], "the rescue holds the agent's work, nothing else"
    assert herd.events("api", "worktree-reset")
    assert not (herd.root / "work.txt").exists()
    assert herd.config_path.read_text() == edited
