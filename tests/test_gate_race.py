"""Twenty answers to one approval gate at once: approve, reject, stop, kill and restart.

Each answers promptly (a reply or a one-line refusal, never a hang or an internal error),
and the session ends in a state one of them makes, with nothing of an earlier run left.
The latencies are in docs/benchmarks-notes.md ("Twenty answers to one gate").
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from typing import Any

import psutil
import pytest
from conftest import SIMAGENT, Herd, sim_repo, wait_until

from agentherd.supervisor.api.client import Client
from agentherd.supervisor.api.protocol import ApiError

ANSWER_BOUND_S = 60.0
"""Each request's reply, however the twenty are ordered by the session's lock: on an idle
machine the slowest took 2.4 s (docs/benchmarks-notes.md); a loaded CI machine is slower."""

REQUESTS: list[tuple[str, dict[str, Any]]] = [
    ("approve", {}),
    ("reject", {}),
    ("stop", {}),
    ("stop", {"kill": True}),
    ("restart", {}),
] * 4
"""Four of each, interleaved."""

THEIRS = {
    "stopped": "a stop or a kill came last",
    "running": "an approve, a reject or a restart came last",
    "waiting-approval": "a restart's new run tampered again and waits at the gate",
    "completed": "an approve or a restart came last and the run finished its plan",
}
"""The states the twenty can leave the session in, and which of them makes each."""


def gated(herd: Herd) -> None:
    repo = sim_repo(herd.root / "repo", features=4)
    agent = json.dumps([*SIMAGENT, "--delay", "0.3", "--tamper-at", "2"])
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{repo}"
        command = {agent}
        agent = "claude"
        restart = "never"
        plan = "feature_list.json"
        progress = "claude-progress.txt"
        on_drift = {{ plan-tampered = "pause" }}
        stop_grace = "2s"
    """)


def alive_runs(herd: Herd) -> set[int]:
    """The run numbers of the session whose processes still live (by their env tag)."""
    assert herd.daemon is not None and herd.daemon.store is not None
    reader = herd.daemon.store.reader()
    try:
        runs = {r.tag: r.run for r in reader.runs("api")}
    finally:
        reader.close()
    found = set()
    for proc in psutil.process_iter():
        try:
            tag = proc.environ().get("HERD_RUN_TAG")
        except (psutil.Error, OSError):
            continue
        if tag in runs:
            found.add(runs[tag])
    return found


@pytest.mark.pidns
def test_twenty_answers_to_one_gate_at_once_each_answer_and_one_of_them_holds(
    herd: Herd,
) -> None:
    gated(herd)
    client = herd.start()
    client.call("start", name="api")
    herd.wait_state("api", "waiting-approval", timeout_s=60)
    ready = threading.Barrier(len(REQUESTS))
    answers: list[tuple[str, str, float] | None] = [None] * len(REQUESTS)

    def ask(index: int, op: str, args: dict[str, Any]) -> None:
        asker = Client(herd.daemon.socket_path)  # type: ignore[union-attr]
        asker.call("info")  # connected and greeted before the race
        label = "kill" if args.get("kill") else op
        ready.wait()
        began = time.monotonic()
        try:
            asker.call(op, name="api", socket_timeout_s=ANSWER_BOUND_S, **args)
            outcome = "ok"
        except ApiError as exc:
            outcome = exc.code
        answers[index] = (label, outcome, time.monotonic() - began)

    threads = [
        threading.Thread(target=ask, args=(i, op, args), daemon=True)
        for i, (op, args) in enumerate(REQUESTS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(ANSWER_BOUND_S + 5)
    assert all(a is not None for a in answers), f"unanswered: {answers}"
    done = [a for a in answers if a is not None]
    for label, outcome, took_s in done:
        assert outcome in ("ok", "bad-state"), (label, outcome)
        assert took_s < ANSWER_BOUND_S, (label, took_s)
    by_verb: dict[str, list[float]] = {}
    for label, _, took_s in done:
        by_verb.setdefault(label, []).append(took_s)
    for label, took in sorted(by_verb.items()):
        print(
            f"{label:8} n={len(took)} median {statistics.median(took):.3f}s "
            f"max {max(took):.3f}s; outcomes {[o for v, o, _ in done if v == label]}"
        )

    settled = herd.wait_state("api", *THEIRS, timeout_s=60)
    print(f"final state {settled['state']} ({settled['reason']}), run {settled['run']}")
    if settled["state"] in ("stopped", "completed"):
        wait_until(lambda: not alive_runs(herd), what="every run of the session to be gone")
    else:
        wait_until(lambda: alive_runs(herd) <= {settled["run"]}, what="earlier runs gone")
    assert herd.status("api")["state"] in THEIRS
