"""The failures a simulated agent injects on request: plan tampering, crash, stall, API error."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from agentherd.supervisor.sim.simfiles import SimError, git, git_dir, load_plan, save_plan, title
from agentherd.supervisor.sim.simstream import SLEEP_STEP, Action, Agent

EXIT_CRASH = 3  # exit code of a simulated crash (--crash-at)

API_ERROR_STATUS = 529  # HTTP status of the simulated API error (--fail-at): "overloaded"


def tamper(agent: Agent, n: int) -> None:
    """Drift the plan: reword feature ``n`` and drop the last feature (unless it is ``n``)."""
    plan = load_plan(agent.plan_path)
    item = plan[n - 1]
    key = "description" if "description" in item else "title"
    item[key] = f"{title(item, n)} (reduced scope)"
    if len(plan) > n:
        plan.pop()

    def rewrite() -> str:
        """Write the drifted plan."""
        save_plan(agent.plan_path, plan)
        return f"Updated {agent.plan_path}"

    action = Action("Edit", {"file_path": str(agent.plan_path)}, rewrite)
    agent.step(n, f"Feature {n} is too large; simplifying the plan.", [action])


def crash(agent: Agent, n: int) -> None:
    """Leave a half edit (a tracked file changed, an untracked file added) and exit 3."""
    tracked = git("ls-files").splitlines()
    plan_name = str(agent.plan_path)
    candidates = [p for p in tracked if p.startswith("src/") and p.endswith(".py")]
    candidates += [p for p in ("README.md", str(agent.progress_path)) if p in tracked]
    candidates += [p for p in tracked if p != plan_name]
    if candidates:
        with open(candidates[0], "a", encoding="utf-8") as handle:
            handle.write(f"# TODO(simagent): feature {n} in progress\n")
    Path("src").mkdir(exist_ok=True)
    Path(f"src/wip_{n}.py").write_text(
        f'"""Unfinished work on feature {n}."""\n\nTODO = True\n', encoding="utf-8"
    )
    partial = json.dumps(agent.envelope("assistant", {"id": "msg_simpartial", "content": []}))
    agent.emit_raw(partial[: len(partial) // 2])
    sys.exit(EXIT_CRASH)


def stall(agent: Agent, n: int) -> None:
    """Print one line, then hang until killed."""
    agent.assistant(n, [{"type": "text", "text": f"Waiting for the test of feature {n}..."}])
    while True:
        time.sleep(SLEEP_STEP)


def fail(agent: Agent, n: int) -> None:
    """Report an API error the way Claude does: ``subtype`` success, ``is_error`` true."""
    body = '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    text = f"API Error: {API_ERROR_STATUS} {body}"
    agent.assistant(n, [{"type": "text", "text": text}], model="<synthetic>")
    agent.result(
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


def limit_fires(n: int, spec: str | None) -> bool:
    """``--limit-at N:SECONDS``: at feature N (once), print Claude's rejected rate limit with
    its reset time and its 429 result; True when it did (the agent then exits 1)."""
    if spec is None:
        return False
    number, sep, seconds = spec.partition(":")
    if not sep or not number.isdigit() or not seconds.isdigit():
        raise SimError(f"--limit-at {spec!r}: expected N:SECONDS, e.g. 2:30")
    if not fires(n, int(number), True, "limited"):
        return False
    info = {"status": "rejected", "resetsAt": int(time.time()) + int(seconds)}
    print(json.dumps({"type": "rate_limit_event", "rate_limit_info": info}), flush=True)
    text = "API Error: 429 rate_limit_error: You've hit your limit"
    print(
        json.dumps(
            {
                "type": "result",
                "subtype": "success",
                "is_error": True,
                "result": text,
                "api_error_status": 429,
                "num_turns": 0,
            }
        ),
        flush=True,
    )
    return True
