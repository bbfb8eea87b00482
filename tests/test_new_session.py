"""`herd new` adds a session to herd.toml (keeping its comments), in a new worktree beside the
person's repository or an existing folder, and starts it on the running daemon; a wrong ask
writes nothing. `herd archive` puts a finished session away without losing its history."""

from __future__ import annotations

import html
import json
import subprocess
import tomllib
from pathlib import Path

from conftest import Herd, git, script, wait_until

from agentherd.sessions.status import SessionStatus
from agentherd.tui.web.fleetpage import fleet_fragment

AGENT_SCRIPT = '#!/bin/sh\necho "working on: $1"\n'
"""The plain preset runs ./run-agent.sh with the prompt appended."""

HEAD = """\
# my fleet: keep this comment
[defaults]
restart = "never"   # and this one

[[session]]
name = "first"
command = {cmd}
"""


def _repo(path: Path) -> Path:
    """A repository whose tree holds an executable run-agent.sh, committed."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "run-agent.sh").write_text(AGENT_SCRIPT)
    (path / "run-agent.sh").chmod(0o755)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def _porcelain(repo: Path) -> str:
    return subprocess.run(
        ["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout


def test_new_makes_a_worktree_keeps_the_comments_and_starts_the_session(herd: Herd) -> None:
    repo = _repo(herd.root / "app")
    herd.write(HEAD.format(cmd=script("print('hi')")))
    herd.start()
    made = herd.cli(
        "new",
        "fix-login",
        "--agent",
        "plain",
        "--repo",
        "app",
        "--prompt",
        "fix the login",
        "--budget-usd",
        "5",
    )
    assert made.returncode == 0, made.stderr
    tree = herd.root / "app.worktrees" / "fix-login"
    assert made.stdout.splitlines()[-1] == "fix-login/1"
    text = herd.config_path.read_text()
    assert text.startswith(HEAD.format(cmd=script("print('hi')")))  # comments and layout kept
    session = next(s for s in tomllib.loads(text)["session"] if s["name"] == "fix-login")
    assert session["command"] == ["./run-agent.sh", "fix the login"]
    assert session["budget"] == {"cost_usd": 5.0}
    assert (tree / "run-agent.sh").is_file() and _porcelain(repo) == ""  # the person's tree clean
    branch = subprocess.run(
        ["git", "branch", "--show-current"], cwd=tree, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert branch == "herd/fix-login"
    done = herd.wait_state("fix-login", "completed", "failed")
    assert done["state"] == "completed", done
    assert "working on: fix the login" in herd.cli("logs", "fix-login").stdout
    assert herd.cli("check").returncode == 0


def test_new_in_an_existing_folder_with_no_start_only_writes(herd: Herd) -> None:
    folder = _repo(herd.root / "work")
    herd.write(HEAD.format(cmd=script("print('hi')")))
    herd.start()
    made = herd.cli("new", "docs", "--agent", "plain", "--folder", "work", "--no-start")
    assert made.returncode == 0, made.stderr
    assert "herd up docs" in made.stderr
    assert 'cwd = "work"' in herd.config_path.read_text()
    assert herd.status("first")["state"] == "idle"
    assert folder.is_dir() and not (herd.root / "work.worktrees").exists()


def test_a_wrong_new_session_writes_nothing_and_says_one_line(herd: Herd) -> None:
    _repo(herd.root / "app")
    herd.write(HEAD.format(cmd=script("print('hi')")))
    before = herd.config_path.read_text()
    for args, says in [
        (["new", "bad name!", "--repo", "app"], "letters, digits"),
        (["new", "first", "--repo", "app"], "exists already"),
        (["new", "x", "--agent", "claud", "--repo", "app"], "choose one of"),
        (["new", "x", "--folder", "nowhere"], "not a folder"),
        (["new", "x"], "either a repository"),
    ]:
        result = herd.cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1 and says in result.stderr, result.stderr
        assert herd.config_path.read_text() == before
        assert not (herd.root / "app.worktrees").exists()


def test_archive_hides_a_stopped_session_keeps_its_history_and_undo_brings_it_back(
    herd: Herd,
) -> None:
    herd.write(
        HEAD.format(cmd=script("print('done')"))
        + '\n[[session]]\nname = "long"\ncommand = '
        + script("import time; print('up', flush=True); time.sleep(60)")
        + '\n[[session]]\nname = "spare"\ncommand = '
        + script("print('spare ran')")
        + "\n"
    )
    client = herd.start()
    client.call("start", name="first")
    herd.wait_state("first", "completed")
    client.call("start", name="long")
    herd.wait_state("long", "running")
    refused = herd.cli("archive", "long")
    assert refused.returncode == 2 and "herd stop long" in refused.stderr, refused.stderr
    assert "archived" not in herd.config_path.read_text()

    archived = herd.cli("archive", "first")
    assert archived.returncode == 0, archived.stderr
    assert "# my fleet: keep this comment" in herd.config_path.read_text()
    wait_until(lambda: herd.status("first")["archived"], what="the daemon to read the archive")
    assert "first" not in herd.cli("ls").stdout and "long" in herd.cli("ls").stdout
    assert "first" not in [s["session"] for s in json.loads(herd.cli("ls", "--json").stdout)]
    assert "first" in herd.cli("ls", "--all").stdout
    assert herd.cli("report", "first").returncode == 0  # its history stays readable
    assert "first" in herd.cli("events", "--session", "first").stdout
    start = herd.cli("start", "first")
    assert start.returncode == 2 and "herd archive --undo first" in start.stderr, start.stderr
    client.call("stop", name="long")
    herd.wait_state("long", "stopped")
    assert herd.cli("archive", "spare").returncode == 0  # never run: `herd up` would start it
    up = herd.cli("up", "--no-tui")
    assert up.returncode == 0 and "spare/" not in up.stdout, up.stdout
    assert herd.status("spare")["state"] == "idle"

    back = herd.cli("archive", "--undo", "first")
    assert back.returncode == 0, back.stderr
    first = tomllib.loads(herd.config_path.read_text())["session"][0]
    assert first["name"] == "first" and "archived" not in first
    wait_until(lambda: "first" in herd.cli("ls").stdout, what="first back in ls")


def test_the_web_fleet_page_leaves_archived_sessions_out() -> None:
    page = fleet_fragment(
        [SessionStatus(session="kept"), SessionStatus(session="put-away", archived=True)],
        html.escape,
    )
    assert "kept" in page and "put-away" not in page


def test_archive_with_no_daemon_refuses_a_session_whose_agent_may_still_run(herd: Herd) -> None:
    """A daemon that exited leaves its agents running (the next one adopts them): the state
    saved in .herd/ says so, and archiving would hide a working agent."""
    herd.write(
        '[[session]]\nname = "long"\ncommand = '
        + script("import time; print('up', flush=True); time.sleep(60)")
        + "\n"
    )
    herd.start().call("start", name="long")
    herd.wait_state("long", "running")
    herd.stop_daemon()
    try:
        refused = herd.cli("archive", "long")
    finally:
        herd.start()  # adopts the run, which the fixture's `down` then stops
    assert refused.returncode == 2 and "herd stop long" in refused.stderr, refused.stderr
    assert "archived" not in herd.config_path.read_text()
