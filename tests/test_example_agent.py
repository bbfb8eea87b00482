"""The example agent of docs/write-your-own-agent.md (examples/agent/) under the real daemon:
its plan items pass, its progress entries are seen, its running totals are counted once, and
the task completes with no warning."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from conftest import Herd, git, wait_until

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "agent"


def test_the_example_agent_passes_its_plan_and_is_counted_as_the_page_says(herd: Herd) -> None:
    for name in ("agent.py", "feature_list.json", "herd.toml"):
        shutil.copy(EXAMPLE / name, herd.root / name)
    # The page's herd.toml as it is, with this interpreter for `python3`.
    toml = (herd.root / "herd.toml").read_text().replace('"python3"', json.dumps(sys.executable))
    herd.write(toml)
    git(herd.root, "init", "-q", "-b", "main")
    git(herd.root, "add", "-A")
    git(herd.root, "commit", "-q", "-m", "the example")
    herd.start().call("start", name="example")
    done = herd.wait_state("example", "completed", "failed", "stopped")
    assert done["state"] == "completed", done
    assert done["plan"] == {"passing": 3, "total": 3, "changed_items": []}
    assert done["warnings"] == []
    latest = done["progress"]["latest"]
    assert any("Document both greetings: done" in entry for entry in latest), latest
    # Running totals: the last line counts, nothing is summed twice.
    usage = done["usage"]
    assert (usage["input_tokens"], usage["output_tokens"], usage["turns"]) == (3600, 900, 3)
    assert usage["cost_usd"] == 0.009
    assert done["agent_session_id"].startswith("example-")

    # The commits are read from git as it changes: under load, after the run's end.
    def commits_seen() -> list[str]:
        events = herd.client.call("events", session="example")
        found = [e["message"] for e in events if e["kind"] == "checkpoint"]
        return found if len(found) >= 4 else []

    commits = wait_until(commits_seen, timeout_s=30, what="the three items' checkpoints")
    assert [m.split(" ", 2)[2] for m in commits[1:]] == [  # after the repository's own first
        "item 1: Say hello to a named person",
        "item 2: Say goodbye politely",
        "item 3: Document both greetings",
    ]
