"""The report after a restart from an earlier checkpoint names the checkpoint the worktree
stands on, not the newer one the reset left out (a real git repo, a real daemon)."""

from __future__ import annotations

import json
import subprocess

from conftest import Herd, wait_until
from test_session_tabs import script_session, write_toml

AGENT = (
    "import os, subprocess, time\n"
    "git = ['git', '-c', 'user.name=a', '-c', 'user.email=a@a']\n"
    "if os.path.basename(os.environ['HERD_RUN_DIR']) != '1':\n"
    "    print('restarted', flush=True); time.sleep(60); raise SystemExit\n"
    "for name in ('first', 'second'):\n"
    "    with open(name + '.txt', 'w') as f: f.write(name + '\\n' * 3)\n"
    "    subprocess.run([*git, 'add', name + '.txt'], check=True)\n"
    "    subprocess.run([*git, 'commit', '-qm', name + ' step'], check=True)\n"
)
"""Run 1 commits "first step" then "second step" and ends; a later run only waits."""


def head(repo: object) -> str:
    """The sha HEAD names."""
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=str(repo), check=True, capture_output=True, text=True
    ).stdout.strip()


def test_report_names_the_checkpoint_restarted_from(herd: Herd) -> None:
    """After `restart --from <first step>`, the report's summary says "last checkpoint
    <first> 'first step'" with one later checkpoint not in the worktree, its JSON's
    `changed.current_sha` is the first step's sha (the list still holds both, oldest first),
    its files touched hold only the first step's file; `herd report` with no daemon agrees."""
    write_toml(herd, script_session(herd.root, "api", AGENT))
    client = herd.start()
    client.call("up")
    wait_until(
        lambda: (herd.status("api")["checkpoint"] or {}).get("subject") == "second step",
        30,
        "the second step recorded",
    )
    herd.wait_state("api", "completed", "stopped", timeout_s=30)
    before = client.call("report", name="api")["report"]["changed"]
    subjects = {c["subject"]: c["sha"] for c in before["checkpoints"]}
    first, second = subjects["first step"], subjects["second step"]
    assert before["current_sha"] == second, "before the restart it stands on the newest"

    client.call("restart", name="api", socket_timeout_s=None, **{"from": first})
    wait_until(lambda: bool(herd.events("api", "worktree-reset")), 30, "the reset")
    wait_until(lambda: herd.status("api")["run"] == 2, 30, "run 2")
    assert head(herd.root / "api") == first
    wait_until(  # the status stands there too (it named the newest until the next commit)
        lambda: (herd.status("api")["checkpoint"] or {}).get("sha") == first, 30, "status"
    )

    reply = client.call("report", name="api")
    changed = reply["report"]["changed"]
    assert changed["current_sha"] == first
    assert [c["sha"] for c in changed["checkpoints"]][-2:] == [first, second]
    summary = next(line for line in reply["markdown"].splitlines() if "last checkpoint" in line)
    assert f"last checkpoint `{first[:7]}` 'first step'" in summary, summary
    assert "1 later checkpoint not in the worktree" in summary, summary
    assert second[:7] not in summary
    touched = reply["report"]["changed"]["files_touched"]
    assert "first.txt" in touched and "second.txt" not in touched, touched

    herd.down()  # read from .herd/ with no daemon: the same checkpoint
    offline = herd.cli("report", "api", "--json")
    assert offline.returncode == 0, offline.stderr
    assert json.loads(offline.stdout)["changed"]["current_sha"] == first
