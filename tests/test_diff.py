"""`herd diff` and the `diff` operation: what an agent changed per checkpoint and in its
uncommitted work, against a real daemon (and with none), bounded on huge diffs."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import time
from pathlib import Path

from conftest import HERD, PY, Herd, git, make_repo, script, wait_until

from agentherd.sessions.checkpoint import Checkpoint
from agentherd.supervisor.api import diffop
from agentherd.supervisor.git import changeset

IDLE = script("import time; time.sleep(60)")


def _session(herd: Herd, repo: Path, extra: str = "") -> None:
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{repo}"
        command = {IDLE}
        stop_grace = "2s"
        {extra}
    """)


def _commit(herd: Herd, repo: Path, message: str) -> str:
    """Commit everything and wait for the daemon to record it as a checkpoint."""
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    sha = git(repo, "rev-parse", "HEAD").strip()
    wait_until(lambda: (herd.status("api")["checkpoint"] or {}).get("sha") == sha, what=message)
    return sha


def _three_checkpoints(herd: Herd) -> tuple[Path, list[str]]:
    """A repo whose session has checkpoints: the first commit, an edit, a rename and binary."""
    repo = make_repo(herd.root / "repo", {"app.py": "a\nb\nc\n", "old.txt": "same\n"})
    _session(herd, repo)
    herd.start()
    first = git(repo, "rev-parse", "HEAD").strip()
    wait_until(lambda: (herd.status("api")["checkpoint"] or {}).get("sha") == first)
    (repo / "app.py").write_text("a\nB\nc\nd\n")
    second = _commit(herd, repo, "edit app")
    git(repo, "mv", "old.txt", "new.txt")
    (repo / "blob.bin").write_bytes(b"\0\1\2" * 100)
    third = _commit(herd, repo, "rename and binary")
    return repo, [first, second, third]


def test_herd_diff_shows_the_work_then_the_latest_checkpoint_against_the_one_before(
    herd: Herd,
) -> None:
    repo, shas = _three_checkpoints(herd)
    (repo / "app.py").write_text("a\nB\nc\nd\ne\n")
    (repo / "notes.md").write_text("one\ntwo\n")
    done = herd.cli("diff", "api", "--stat")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "api: uncommitted work against HEAD", lines
    assert "  M app.py  +1 -0" in lines and "  ? notes.md  +2 -0" in lines, lines
    at = lines.index(f"api: checkpoint {shas[2][:7]} 'rename and binary' against "
                     f"checkpoint {shas[1][:7]}")  # fmt: skip
    assert lines[at + 1 : at + 4] == ["  A blob.bin  binary", "  R old.txt -> new.txt  +0 -0",
                                      "  2 files changed, +0 -0"], lines  # fmt: skip
    # A named checkpoint (a sha prefix), with its text: the previous one is its parent here.
    full = herd.cli("diff", "api", shas[1][:8])
    assert full.returncode == 0, full.stderr
    assert f"against checkpoint {shas[0][:7]}" in full.stdout
    assert "-b\n+B\n c\n+d\n" in full.stdout and "uncommitted" not in full.stdout
    assert "\x1b[" not in full.stdout, "no colours when stdout is not a terminal"
    # The first checkpoint against its parent: the empty tree of a root commit.
    root = herd.cli("diff", "api", shas[0][:7], "--json")
    reply = json.loads(root.stdout)[0]
    assert {f["path"] for f in reply["files"]} == {"app.py", "old.txt"}
    assert reply["base"] == changeset.EMPTY_TREE


def test_an_unknown_checkpoint_is_one_line_and_exit_2(herd: Herd) -> None:
    repo, _ = _three_checkpoints(herd)
    done = herd.cli("diff", "api", "deadbeef")
    assert done.returncode == 2
    assert (
        done.stderr.startswith("herd: api: no checkpoint 'deadbeef'")
        and done.stderr.count("\n") == 1
    ), done.stderr
    unknown = herd.cli("diff", "nope")
    assert unknown.returncode == 2 and "no session named 'nope'" in unknown.stderr


def test_against_verified_compares_with_the_last_verified_checkpoint(herd: Herd) -> None:
    repo = make_repo(herd.root / "repo", {"ok.txt": "1\n"})
    verify = json.dumps([PY, "-c", "import os, sys; sys.exit(not os.path.exists('ok.txt'))"])
    _session(herd, repo, f"verify = {verify}")
    herd.start()
    good = git(repo, "rev-parse", "HEAD").strip()
    wait_until(lambda: (c := herd.status("api")["checkpoint"]) and c["verified"] is True)
    git(repo, "rm", "-q", "ok.txt")
    _commit(herd, repo, "break it")
    wait_until(lambda: herd.status("api")["checkpoint"]["verified"] is False)
    (repo / "more.txt").write_text("x\n")
    last = _commit(herd, repo, "more")
    done = herd.cli("diff", "api", last[:7], "--against", "verified", "--stat")
    assert done.returncode == 0, done.stderr
    assert f"against verified checkpoint {good[:7]}" in done.stdout, done.stdout
    assert "  D ok.txt  +0 -1" in done.stdout and "  A more.txt  +1 -0" in done.stdout


def test_agent_written_names_and_lines_reach_the_terminal_inert(herd: Herd) -> None:
    repo, _ = _three_checkpoints(herd)
    (repo / "evil\x1b]0;owned\x07.txt").write_text("\x1b[2Jwiped\n")
    done = herd.cli("diff", "api", "--work")
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert "+^[[2Jwiped" in done.stdout, done.stdout


def test_herd_diff_reads_the_checkpoints_without_a_daemon(herd: Herd) -> None:
    repo, shas = _three_checkpoints(herd)
    herd.down()
    done = herd.cli("diff", "api", shas[1][:7], "--stat")
    assert done.returncode == 0, done.stderr
    assert "no daemon is running" in done.stderr
    assert "  M app.py  +2 -1" in done.stdout, done.stdout


def test_a_50_mb_diff_is_cut_per_file_and_in_total_and_says_so(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"small.txt": "x\n"})
    line = b"0123456789" * 10 + b"\n"
    (repo / "huge.txt").write_bytes(line * (50 * 1024 * 1024 // len(line)))
    for n in range(12):
        (repo / f"mid{n:02}.txt").write_bytes(line * 3000)  # ~300 KB each
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "big")
    head = git(repo, "rev-parse", "HEAD").strip()
    files, more = changeset.changed_files(repo, f"{head}~1", head, 100)
    huge = next(f for f in files if f.path == "huge.txt")
    assert huge.added == 50 * 1024 * 1024 // len(line) and not more
    started = time.monotonic()
    text, cut = changeset.file_diff(repo, f"{head}~1", head, huge, 64 << 10)
    assert cut and len(text.encode()) <= 64 << 10 and text.startswith("diff --git a/huge.txt")
    assert time.monotonic() - started < 5, "git was stopped at the bound, not read to the end"
    checkpoint = Checkpoint(sha=head, at="2026-12-04T00:00:00Z", subject="big")
    reply = diffop.answer("api", repo, [checkpoint], {"texts": True})
    texts = reply["texts"]
    assert texts["huge.txt"]["truncated"] is True
    assert len(texts["huge.txt"]["text"].encode()) <= diffop.FILE_TEXT_MAX_BYTES
    assert sum(len(t["text"].encode()) for t in texts.values()) <= diffop.TOTAL_TEXT_MAX_BYTES
    assert reply["texts_truncated"] is True and len(texts) < len(reply["files"])


def test_on_a_terminal_the_diff_goes_through_the_pager_in_colour(herd: Herd) -> None:
    """stdout a terminal: the text goes to $PAGER, coloured, the agent's escapes still inert."""
    repo, shas = _three_checkpoints(herd)
    (repo / "app.py").write_text("a\nB\nc\nd\n\x1b[2Jwiped\n")
    paged = herd.root / "paged.txt"
    leader, follower = pty.openpty()
    env = {**os.environ, "PAGER": f"sh -c 'cat > {paged}'"}
    env.pop("NO_COLOR", None)
    try:
        done = subprocess.run(
            [HERD, "diff", "api", "--work"],
            cwd=herd.root,
            stdin=subprocess.DEVNULL,
            stdout=follower,
            stderr=subprocess.PIPE,
            env=env,
            timeout=60,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert done.returncode == 0, done.stderr
    text = paged.read_text()
    assert "\x1b[32m+^[[2Jwiped\x1b[0m" in text, text
    assert "\x1b[1mapi: uncommitted work against HEAD\x1b[0m" in text


def test_an_untracked_link_to_an_endless_file_is_not_followed(tmp_path: Path) -> None:
    """The agent's worktree may hold a link to /dev/zero (or to a secret): the work's file
    list counts the link itself, as git does, and returns at once."""
    repo = make_repo(tmp_path / "repo")
    (repo / "zeros").symlink_to("/dev/zero")
    files, _ = changeset.changed_files(repo, "HEAD", None, 100)
    assert [(f.path, f.status, f.added) for f in files] == [("zeros", "untracked", 1)]
    text, cut = changeset.file_diff(repo, "HEAD", None, files[0], 4096)
    assert "+/dev/zero" in text and not cut


def test_the_fast_path_prints_what_the_full_command_line_prints(herd: Herd) -> None:
    """`bin/herd diff` answers without click or pydantic (tui/cli/fastread.py): the same bytes
    and exit codes as the full command line, in every form it takes, and the same error."""
    repo, shas = _three_checkpoints(herd)
    (repo / "app.py").write_text("a\nB\nc\nd\ne\n")
    full = [PY, "-c", "from agentherd.tui.cli.cli import main; main()"]
    timed = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    forms = [
        ["diff", "api"],
        ["diff", "api", "--stat"],
        ["diff", "api", "--work"],
        ["diff", "api", shas[1][:8]],
        ["diff", "api", shas[2][:7], "--against", "verified", "--stat"],
        ["diff", "api", "--file", "app.py"],
        ["diff", "nope"],
    ]
    for form in forms:
        fast = subprocess.run(
            [HERD, *form], cwd=herd.root, capture_output=True, text=True, env=timed
        )
        slow = subprocess.run([*full, *form], cwd=herd.root, capture_output=True, text=True)
        assert (fast.returncode, fast.stdout) == (slow.returncode, slow.stdout), form
        said = [line for line in fast.stderr.splitlines() if not line.startswith("import time:")]
        assert said == slow.stderr.splitlines(), form
        imported = {
            line.rpartition("|")[2].strip()
            for line in fast.stderr.splitlines()
            if line.startswith("import time:")
        }
        if form != ["diff", "nope"]:  # an error is the full command line's to word
            assert "agentherd.tui.cli.diffprint" in imported and not imported & {
                "click",
                "pydantic",
            }, form
