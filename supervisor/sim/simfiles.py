"""The files a simulated agent works on: its plan, its progress file, the code it writes, git."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

GIT_IDENTITY = [
    "-c",
    "user.name=simagent",
    "-c",
    "user.email=simagent@localhost",
    "-c",
    "commit.gpgsign=false",
]
INIT_COMMIT = "Initial setup: feature_list.json and project structure"
GITIGNORE = "__pycache__/\n*.pyc\n.pytest_cache/\n.herd/\n"
TODO_FEATURES = [
    "User can add a todo by typing text and pressing Enter",
    "User can mark a todo as completed",
    "User can filter the list to show only completed todos",
    "Todos persist after a page reload",
    "User can edit a todo by double-clicking it",
    "User can delete a todo with the remove button",
    "Item counter shows how many todos are left",
    "User can clear all completed todos at once",
    "Completed todos are shown struck through",
    "Empty todo text is rejected",
    "User can toggle all todos with one checkbox",
    "Filter choice is kept in the URL",
]

Item = dict[str, Any]


class SimError(Exception):
    """A problem the person running simagent can fix; reported on stderr with exit code 2."""


def git(*args: str) -> str:
    """Run git with the given arguments in the current directory and return its stdout."""
    proc = subprocess.run(["git", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SimError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout


def git_dir() -> Path:
    """Return the absolute git directory of the current worktree."""
    return Path(git("rev-parse", "--absolute-git-dir").strip())


def load_plan(path: Path) -> list[Item]:
    """Read the feature list: a JSON array of objects, each with a ``passes`` flag."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SimError(f"{path}: cannot read the feature list ({exc})") from exc
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise SimError(f"{path}: the feature list must be a JSON array of objects")
    return data


def save_plan(path: Path, plan: list[Item]) -> None:
    """Write the feature list back as indented JSON."""
    path.write_text(json.dumps(plan, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def title(item: Item, n: int) -> str:
    """Return the text that names plan item ``n``."""
    return str(item.get("description") or item.get("title") or f"feature {n}")


def first_failing(plan: list[Item]) -> int | None:
    """Return the 1-based index of the first item that does not pass, or None."""
    for n, item in enumerate(plan, start=1):
        if item.get("passes") is not True:
            return n
    return None


def status_line(plan: list[Item]) -> str:
    """Return the progress-file status bullet, e.g. ``- Status: 3/7 tests passing``."""
    done = sum(1 for item in plan if item.get("passes") is True)
    return f"- Status: {done}/{len(plan)} tests passing"


def next_session_number(path: Path) -> int:
    """Return one more than the highest ``## Session <k>`` header in the progress file."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    numbers = [int(k) for k in re.findall(r"^## Session (\d+)", text, flags=re.M)]
    return max(numbers, default=0) + 1


def append_progress(path: Path, kind: str, bullets: Sequence[str]) -> None:
    """Append a ``## Session <k> (<kind>) — <date>`` section with the given bullet lines."""
    header = f"## Session {next_session_number(path)} ({kind}) — {time.strftime('%Y-%m-%d')}"
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    if not old:
        old = f"# {path.name} — {Path.cwd().name}\n"
    if not old.endswith("\n"):
        old += "\n"
    path.write_text(old + "\n" + "\n".join([header, *bullets]) + "\n", encoding="utf-8")


def feature_files(n: int, text: str) -> dict[str, str]:
    """Return the source and test file (path -> content) that implement feature ``n``."""
    src = (
        f'"""Feature {n} of the plan (written by simagent)."""\n\n'
        f"DESCRIPTION = {text!r}\n\n\n"
        f"def feature_{n}() -> str:\n"
        f'    """Return the description of feature {n}."""\n'
        "    return DESCRIPTION\n"
    )
    test = (
        f'"""Test of feature {n} (written by simagent)."""\n\n'
        "import sys\nfrom pathlib import Path\n\n"
        'sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))\n\n'
        f"from feature_{n} import DESCRIPTION, feature_{n}  # noqa: E402\n\n\n"
        f"def test_feature_{n}() -> None:\n"
        f'    """Feature {n} returns its description."""\n'
        f"    assert feature_{n}() == DESCRIPTION\n"
    )
    return {f"src/feature_{n}.py": src, f"tests/test_feature_{n}.py": test}


def write_file(path: str, content: str) -> Callable[[], str]:
    """Return an action body that writes ``content`` to ``path``."""

    def run() -> str:
        """Write the file, creating its folder."""
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(content, encoding="utf-8")
        return f"File created successfully at: {path}"

    return run


def commit(paths: Sequence[str], message: str) -> str:
    """Stage ``paths`` and commit them without hooks; return the tool output."""
    git("add", "--", *paths)
    git(*GIT_IDENTITY, "commit", "-q", "--no-verify", "-m", message)
    return f"[{git('rev-parse', '--short', 'HEAD').strip()}] {message}"
