"""A simulated long-running coding agent that speaks Claude stream-json, for tests and demos.

Run it in a git worktree: ``python -m agentherd.supervisor.sim.simagent [options]``. It works the
feature list one failing item at a time the way the long-running harness does: write code and a
test, flip ``passes``, append to the progress file, commit. Options inject the failures a
supervisor must survive (crash mid-edit, stall, plan tampering, API-error results, floods).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODEL = "sim-1"
TOOLS = ["Bash", "Edit", "Glob", "Grep", "Read", "Write"]
SLEEP_STEP = 0.05  # seconds per sleep slice: short enough that signals feel immediate
EXIT_CRASH = 3  # exit code of a simulated crash (--crash-at)
EXIT_USAGE = 2  # exit code of an error the person running simagent can fix
EXIT_INTERRUPT = 130  # exit code after Ctrl-C, as shells report SIGINT
API_ERROR_STATUS = 529  # HTTP status of the simulated API error (--fail-at): "overloaded"
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
FLOOD_SAMPLES = [
    "\x1b[31mred\x1b[0m noise line {k} of feature {n}",
    "building {k}%\rbuilding done (feature {n})",
    "\x1b[1;32mok\x1b[0m step {k} \x1b]0;simagent title\x07(feature {n})",
]

Item = dict[str, Any]


class SimError(Exception):
    """A problem the person running simagent can fix; reported on stderr with exit code 2."""


@dataclass
class Action:
    """One tool call the agent makes: the tool name, its input and the code that does it."""

    name: str
    input: dict[str, Any]
    run: Callable[[], str]


def pause(seconds: float) -> None:
    """Sleep for ``seconds`` in small slices so that signals are handled promptly."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(SLEEP_STEP, left))


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


def usage_for(n: int, turn: int) -> dict[str, int]:
    """Return deterministic small token counts for turn ``turn`` of feature ``n``."""
    return {
        "input_tokens": 4 + n % 7 + turn,
        "cache_creation_input_tokens": 200 + 37 * n + 11 * turn,
        "cache_read_input_tokens": 12000 + 900 * n + 150 * turn,
        "output_tokens": 60 + 13 * n + 25 * turn,
    }


@dataclass
class Agent:
    """One simagent process: its options, session id and running totals."""

    args: argparse.Namespace
    session_id: str
    started: float = field(default_factory=time.monotonic)
    turns: int = 0
    cost: float = 0.0
    usage: dict[str, int] = field(default_factory=lambda: dict.fromkeys(usage_for(0, 0), 0))
    notes: list[str] = field(default_factory=list)

    @property
    def plan_path(self) -> Path:
        """The feature list file."""
        return Path(self.args.plan)

    @property
    def progress_path(self) -> Path:
        """The progress file."""
        return Path(self.args.progress)

    def emit(self, obj: dict[str, Any]) -> None:
        """Print one JSON line and flush it."""
        self.emit_raw(json.dumps(obj, separators=(",", ":")) + "\n")

    def emit_raw(self, text: str) -> None:
        """Print raw text and flush it."""
        sys.stdout.write(text)
        sys.stdout.flush()

    def envelope(self, kind: str, message: dict[str, Any]) -> dict[str, Any]:
        """Wrap a message in an ``assistant`` or ``user`` line."""
        return {
            "type": kind,
            "message": message,
            "parent_tool_use_id": None,
            "session_id": self.session_id,
            "uuid": str(uuid.uuid4()),
        }

    def assistant(
        self, n: int, blocks: list[dict[str, Any]], *, turn: int = 0, model: str = MODEL
    ) -> None:
        """Print an assistant message with usage derived from feature ``n`` and its turn."""
        usage = usage_for(n, turn) if model == MODEL else dict.fromkeys(self.usage, 0)
        self.turns += 1
        for key, value in usage.items():
            self.usage[key] += value
        message = {
            "id": f"msg_sim{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": "tool_use" if blocks[-1]["type"] == "tool_use" else "end_turn",
            "stop_sequence": None,
            "usage": usage,
        }
        self.emit(self.envelope("assistant", message))

    def step(self, n: int, text: str | None, actions: Sequence[Action], turn: int = 0) -> None:
        """Print one assistant turn calling ``actions``, run them and print their results."""
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        ids = [f"toolu_sim{uuid.uuid4().hex[:20]}" for _ in actions]
        for tool_id, action in zip(ids, actions, strict=True):
            blocks.append(
                {"type": "tool_use", "id": tool_id, "name": action.name, "input": action.input}
            )
        self.assistant(n, blocks, turn=turn)
        if not actions:
            return
        results = [
            {"type": "tool_result", "tool_use_id": tool_id, "content": action.run()}
            for tool_id, action in zip(ids, actions, strict=True)
        ]
        self.emit(self.envelope("user", {"role": "user", "content": results}))

    def work(self, n: int, text: str, actions: Sequence[Action]) -> None:
        """Spread ``actions`` over 1-3 turns (by feature index) with the configured delay."""
        count = min(1 + (n - 1) % 3, len(actions))
        delay = max(0.0, self.args.delay * (1 + random.uniform(-1, 1) * self.args.jitter))
        size, extra = divmod(len(actions), count)
        start = 0
        for i in range(count):
            end = start + size + (1 if i < extra else 0)
            pause(delay / count)
            self.step(n, text if i == 0 else None, actions[start:end], turn=i)
            start = end

    def result(self, text: str, *, is_error: bool = False, **extra: Any) -> None:
        """Print the final ``result`` line with this process's running totals."""
        duration_ms = int((time.monotonic() - self.started) * 1000)
        cost = round(self.cost, 6)
        model_usage = {
            "inputTokens": self.usage["input_tokens"],
            "outputTokens": self.usage["output_tokens"],
            "cacheReadInputTokens": self.usage["cache_read_input_tokens"],
            "cacheCreationInputTokens": self.usage["cache_creation_input_tokens"],
            "costUSD": cost,
        }
        line = {
            "type": "result",
            "subtype": "success",
            "is_error": is_error,
            "num_turns": self.turns,
            "duration_ms": duration_ms,
            "duration_api_ms": duration_ms * 4 // 5,
            "result": text,
            "session_id": self.session_id,
            "total_cost_usd": cost,
            "usage": dict(self.usage),
            "modelUsage": {MODEL: model_usage},
            "terminal_reason": "completed",
            "uuid": str(uuid.uuid4()),
        }
        self.emit(line | extra)

    def flood(self, n: int) -> None:
        """Print ``--flood`` lines of plain-text noise with escape sequences."""
        for k in range(self.args.flood):
            self.emit_raw(FLOOD_SAMPLES[k % len(FLOOD_SAMPLES)].format(k=k, n=n) + "\n")

    def initialize(self, count: int) -> None:
        """Act as the initializer: write plan, progress file and skeleton, then commit."""
        plan = [
            {
                "category": "style" if n % 4 == 0 else "functional",
                "description": f"Feature {n}: {TODO_FEATURES[(n - 1) % len(TODO_FEATURES)]}",
                "steps": [
                    "Step 1: Open the app",
                    f"Step 2: Exercise feature {n}",
                    f"Step 3: Verify feature {n} works",
                ],
                "passes": False,
            }
            for n in range(1, count + 1)
        ]
        style = sum(1 for item in plan if item["category"] == "style")

        def setup() -> str:
            """Write the plan, the progress file, .gitignore and README."""
            save_plan(self.plan_path, plan)
            Path(".gitignore").write_text(GITIGNORE, encoding="utf-8")
            Path("README.md").write_text("# todo-app\n\nBuilt by simagent.\n", encoding="utf-8")
            return f"Wrote {self.plan_path} with {count} features"

        def commit() -> str:
            """Append the initializer's progress entry and make the first commit."""
            bullets = [
                f"- Created {self.plan_path.name} with {count} features "
                f'({count - style} functional, {style} style), all "passes": false.',
                "- Set up the project structure: README.md, .gitignore, src/ and tests/.",
                f'- Commit: "{INIT_COMMIT}"',
                f"- Next: feature 1 ({plan[0]['description']})." if plan else "- Next: nothing.",
                status_line(plan),
            ]
            append_progress(self.progress_path, "initializer", bullets)
            paths = [str(self.plan_path), str(self.progress_path), ".gitignore", "README.md"]
            return self.commit(paths, INIT_COMMIT)

        self.work(
            1,
            f"Setting up the project: a feature list of {count} features.",
            [
                Action("Write", {"file_path": str(self.plan_path)}, setup),
                Action("Bash", {"command": f"git commit -m '{INIT_COMMIT}'"}, commit),
            ],
        )
        self.cost += self.args.cost_per_feature

    def commit(self, paths: Sequence[str], message: str) -> str:
        """Stage ``paths`` and commit them without hooks; return the tool output."""
        git("add", "--", *paths)
        git(*GIT_IDENTITY, "commit", "-q", "--no-verify", "-m", message)
        return f"[{git('rev-parse', '--short', 'HEAD').strip()}] {message}"

    def implement(self, n: int) -> None:
        """Implement feature ``n``: code, test, flip ``passes``, progress entry, commit."""
        plan = load_plan(self.plan_path)
        text = title(plan[n - 1], n)
        files = feature_files(n, text)
        message = f"Implement {text} - verified"

        def finish() -> str:
            """Flip the feature to passing, write the progress entry and commit."""
            fresh = load_plan(self.plan_path)
            fresh[n - 1]["passes"] = True
            save_plan(self.plan_path, fresh)
            self.write_entry(fresh, n, files, message)
            return self.commit([*files, str(self.plan_path), str(self.progress_path)], message)

        actions = [Action("Write", {"file_path": p}, write_file(p, c)) for p, c in files.items()]
        test_cmd = f"python -m pytest -q tests/test_feature_{n}.py"
        actions.append(Action("Bash", {"command": test_cmd}, lambda: "1 passed"))
        actions.append(Action("Bash", {"command": f"git commit -m '{message}'"}, finish))
        self.work(n, f"Next failing feature is {n}: {text}. Implementing it.", actions)
        self.cost += self.args.cost_per_feature

    def write_entry(self, plan: list[Item], n: int, files: dict[str, str], message: str) -> None:
        """Append the coding session's progress entry for feature ``n``."""
        previous = [k for k in range(1, n) if plan[k - 1].get("passes") is True]
        if previous:
            k = previous[-1]
            check = f"- Verification: re-ran feature {k} ({title(plan[k - 1], k)}); still passes."
        else:
            check = "- Verification: no passing features to re-check yet."
        following = first_failing(plan)
        if following is None:
            upcoming = "- Next: nothing left; all features pass."
        else:
            upcoming = f"- Next: feature {following} ({title(plan[following - 1], following)})."
        bullets = [
            *self.notes,
            check,
            f"- Implemented feature {n} ({title(plan[n - 1], n)}); added {', '.join(files)}.",
            f"- Marked feature {n} as passing.",
            f'- Commit: "{message}"',
            upcoming,
            status_line(plan),
        ]
        self.notes = []
        append_progress(self.progress_path, "coding", bullets)

    def tamper(self, n: int) -> None:
        """Drift the plan: reword feature ``n`` and drop the last feature (unless it is ``n``)."""
        plan = load_plan(self.plan_path)
        item = plan[n - 1]
        key = "description" if "description" in item else "title"
        item[key] = f"{title(item, n)} (reduced scope)"
        if len(plan) > n:
            plan.pop()

        def rewrite() -> str:
            """Write the drifted plan."""
            save_plan(self.plan_path, plan)
            return f"Updated {self.plan_path}"

        action = Action("Edit", {"file_path": str(self.plan_path)}, rewrite)
        self.step(n, f"Feature {n} is too large; simplifying the plan.", [action])

    def crash(self, n: int) -> None:
        """Leave a half edit (a tracked file changed, an untracked file added) and exit 3."""
        tracked = git("ls-files").splitlines()
        plan_name = str(self.plan_path)
        candidates = [p for p in tracked if p.startswith("src/") and p.endswith(".py")]
        candidates += [p for p in ("README.md", str(self.progress_path)) if p in tracked]
        candidates += [p for p in tracked if p != plan_name]
        if candidates:
            with open(candidates[0], "a", encoding="utf-8") as handle:
                handle.write(f"# TODO(simagent): feature {n} in progress\n")
        Path("src").mkdir(exist_ok=True)
        Path(f"src/wip_{n}.py").write_text(
            f'"""Unfinished work on feature {n}."""\n\nTODO = True\n', encoding="utf-8"
        )
        partial = json.dumps(self.envelope("assistant", {"id": "msg_simpartial", "content": []}))
        self.emit_raw(partial[: len(partial) // 2])
        sys.exit(EXIT_CRASH)

    def stall(self, n: int) -> None:
        """Print one line, then hang until killed."""
        self.assistant(n, [{"type": "text", "text": f"Waiting for the test of feature {n}..."}])
        while True:
            time.sleep(SLEEP_STEP)

    def fail(self, n: int) -> None:
        """Report an API error the way Claude does: ``subtype`` success, ``is_error`` true."""
        body = '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
        text = f"API Error: {API_ERROR_STATUS} {body}"
        self.assistant(n, [{"type": "text", "text": text}], model="<synthetic>")
        self.result(
            text,
            is_error=True,
            errors=[],
            terminal_reason="api_error",
            api_error_status=API_ERROR_STATUS,
        )


def wait_for(path: Path) -> None:
    """Hang silently until ``path`` exists (a test or a person releases the agent)."""
    while not path.exists():
        time.sleep(SLEEP_STEP)


def gates(specs: Sequence[str]) -> dict[int, Path]:
    """Parse ``--wait-at N:PATH`` options into feature number -> file to wait for."""
    found: dict[int, Path] = {}
    for spec in specs:
        number, sep, path = spec.partition(":")
        if not sep or not number.isdigit() or not path:
            raise SimError(f"--wait-at {spec!r}: expected N:PATH, e.g. 2:go")
        found[int(number)] = Path(path)
    return found


def quits(n: int, at: int | None, times: int) -> bool:
    """Tell whether the agent gives up at feature ``n`` now (the first ``times`` times)."""
    if at != n:
        return False
    marker = git_dir() / f"simagent-quit-{n}"
    done = int(marker.read_text(encoding="utf-8")) if marker.exists() else 0
    if done >= times:
        return False
    marker.write_text(f"{done + 1}\n", encoding="utf-8")
    return True


def once_marker(name: str, n: int) -> Path:
    """Return the marker file (inside the git dir) that makes a ``--*-once`` fault fire once."""
    return git_dir() / f"simagent-{name}-{n}"


def fires(n: int, at: int | None, once: bool, name: str) -> bool:
    """Tell whether the fault ``name`` set for feature ``at`` fires now (and mark it if once)."""
    if at != n:
        return False
    if not once:
        return True
    marker = once_marker(name, n)
    if marker.exists():
        return False
    marker.write_text("1\n", encoding="utf-8")
    return True


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line."""
    p = argparse.ArgumentParser(prog="simagent", description=__doc__.splitlines()[0])
    p.add_argument("--plan", default="feature_list.json", help="feature list (JSON array)")
    p.add_argument("--progress", default="claude-progress.txt", help="progress file")
    p.add_argument("--init", type=int, metavar="N", help="create a plan of N features if absent")
    p.add_argument("--delay", type=float, default=0.2, help="seconds of work per feature")
    p.add_argument("--jitter", type=float, default=0.0, help="random +- fraction of --delay")
    p.add_argument("--crash-at", type=int, metavar="N", help="crash mid-edit at feature N")
    p.add_argument("--crash-once", action="store_true", help="crash only on the first try")
    p.add_argument("--fail-at", type=int, metavar="N", help="API-error result at feature N")
    p.add_argument("--fail-once", action="store_true", help="fail only on the first try")
    p.add_argument("--stall-at", type=int, metavar="N", help="hang silently at feature N")
    p.add_argument("--stall-once", action="store_true", help="stall only on the first try")
    p.add_argument("--tamper-at", type=int, metavar="N", help="edit the plan at feature N")
    p.add_argument(
        "--wait-at",
        action="append",
        default=[],
        metavar="N:PATH",
        help="before feature N, hang silently until PATH exists (repeatable)",
    )
    p.add_argument("--quit-at", type=int, metavar="N", help="at feature N, exit 0 claiming done")
    p.add_argument("--quit-times", type=int, default=1, metavar="K", help="quit the first K times")
    p.add_argument("--flood", type=int, default=0, metavar="N", help="noise lines per feature")
    p.add_argument("--resume", metavar="ID", help="continue session ID (keeps the id)")
    p.add_argument("--session-id", metavar="ID", help="pin the id of a new session")
    p.add_argument("--one-per-run", action="store_true", help="at most one feature, then exit")
    p.add_argument("--ignore-sigterm", action="store_true", help="ignore SIGTERM")
    p.add_argument("--cost-per-feature", type=float, default=0.05, metavar="USD")
    return p.parse_args(argv)


def run(args: argparse.Namespace) -> int:
    """Do the work the options ask for and return the exit code."""
    git("rev-parse", "--is-inside-work-tree")
    plan_path = Path(args.plan)
    if not plan_path.exists() and args.init is None:
        raise SimError(f"{plan_path}: no feature list; create it or pass --init N")
    if args.init is not None and args.init < 1:
        raise SimError(f"--init {args.init}: the number of features must be at least 1")
    waits = gates(args.wait_at)
    agent = Agent(args, args.resume or args.session_id or str(uuid.uuid4()))
    rescue = os.environ.get("HERD_RESCUE_REF", "")
    init: dict[str, Any] = {
        "type": "system",
        "subtype": "init",
        "cwd": os.getcwd(),
        "session_id": agent.session_id,
        "tools": TOOLS,
        "mcp_servers": [],
        "model": MODEL,
        "permissionMode": "bypassPermissions",
        "apiKeySource": "none",
        "uuid": str(uuid.uuid4()),
    }
    if rescue:
        init["rescue_ref"] = rescue
        agent.notes.append(f"- Previous edits were rolled back; saved at {rescue}.")
    if args.resume:
        agent.notes.insert(0, f"- Resumed session {args.resume}.")
    agent.emit(init)
    if not plan_path.exists():
        agent.initialize(args.init)
        if args.one_per_run:
            agent.result(f"Initialized the project with {args.init} features.")
            return 0
    done = 0
    while True:
        plan = load_plan(plan_path)
        n = first_failing(plan)
        if n is None:
            if done == 0:
                agent.assistant(0, [{"type": "text", "text": "All features pass already."}])
                agent.result(f"Nothing left to do: all {len(plan)} features pass.")
            else:
                agent.result(f"All {len(plan)} features pass.")
            return 0
        if fires(n, args.fail_at, args.fail_once, "failed"):
            agent.fail(n)
            return 0
        if fires(n, args.crash_at, args.crash_once, "crashed"):
            agent.crash(n)
        if fires(n, args.stall_at, args.stall_once, "stalled"):
            agent.stall(n)
        if quits(n, args.quit_at, args.quit_times):
            # An early exit: success reported while this item (and maybe others) still fails.
            agent.result(f"All done: feature {n} is good enough as it is.")
            return 0
        if n in waits:
            wait_for(waits.pop(n))
        agent.flood(n)
        if n == args.tamper_at:
            args.tamper_at = None
            agent.tamper(n)
        agent.implement(n)
        done += 1
        if args.one_per_run:
            agent.result(f"Implemented feature {n}: {title(load_plan(plan_path)[n - 1], n)}.")
            return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: set up signals, run, and turn errors into exit codes."""
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, signal.SIG_IGN if args.ignore_sigterm else signal.SIG_DFL)
    try:
        return run(args)
    except SimError as exc:
        print(f"simagent: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPT


if __name__ == "__main__":
    sys.exit(main())
