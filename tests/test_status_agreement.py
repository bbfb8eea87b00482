"""One session's status is the same from the daemon and from `.herd/` after `herd down`.

A real daemon on its real socket, sessions that spent (a cost estimated from herd.toml's price,
a cost reported, two tasks under a life budget) with budgets and a fleet budget, a budget
warning left open; then `herd down`, and the same reads with no daemon.
"""

from __future__ import annotations

import json
from typing import Any

from conftest import Herd, script, wait_until

AGREED = ("usage", "usage_total", "budget", "fleet", "warnings")
"""What `herd status --json` must say alike before and after `herd down`."""


def waits_for(marker: str, tokens: int) -> str:
    """An agent reporting `tokens` (no cost: herd estimates it), then exiting once `marker` is."""
    return script(f"""
        import json, pathlib, time
        print(json.dumps({{"usage": {{"input_tokens": {tokens}, "output_tokens": 500}},
                           "turns": 2}}), flush=True)
        while not pathlib.Path({marker!r}).exists():
            time.sleep(0.02)
    """)


REPORTS_COST = script("""
    import json
    print(json.dumps({"usage": {"input_tokens": 300}, "cost_usd": 0.0125, "turns": 1}), flush=True)
""")


def ls_json(herd: Herd) -> tuple[dict[str, dict[str, Any]], str]:
    """`herd ls --json` by session name, and what it said on stderr."""
    listed = herd.cli("ls", "--json")
    assert listed.returncode == 0, listed.stderr
    return {s["session"]: s for s in json.loads(listed.stdout)}, listed.stderr


def status_json(herd: Herd, name: str) -> tuple[dict[str, Any], str]:
    shown = herd.cli("status", name, "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout), shown.stderr


def agreed(status: dict[str, Any]) -> dict[str, Any]:
    return {key: status.get(key) for key in AGREED}


def test_status_and_ls_read_the_same_spend_budgets_and_warnings_after_herd_down(
    herd: Herd,
) -> None:
    marker = herd.root / "go"
    herd.write(f"""
        [fleet]
        budget = {{ tokens = 1000000, cost_usd = 100.0 }}

        [prices.local]
        input_usd_per_mtok = 10.0
        output_usd_per_mtok = 20.0

        [[session]]
        name = "priced"
        command = {waits_for(str(marker), 2000)}
        price = "local"
        restart = "never"
        budget = {{ tokens = 10000, cost_usd = 1.0, wall_time = "1h", turns = 50, warn_at = 0.1 }}

        [[session]]
        name = "life"
        command = {REPORTS_COST}
        restart = "never"
        budget = {{ tokens = 100000, restarts = 5, covers = "life" }}
    """)
    client = herd.start()
    client.call("start", name="priced")
    wait_until(
        lambda: any(w["kind"] == "budget-warning" for w in herd.status("priced")["warnings"]),
        what="the tokens budget's warning (2,500 of 10,000 at warn_at 0.1)",
    )
    marker.write_text("go")
    herd.wait_state("priced", "completed")
    for _ in range(2):  # two tasks: the life budget counts both, `usage` only the second
        client.call("start", name="life")
        herd.wait_state("life", "completed")
    assert herd.status("life")["run"] == 2

    def settled() -> bool:
        """The fleet's sum (up to a budget check late) has every session's spend."""
        sessions = client.call("ls")
        fleet = sessions[0]["fleet"] or {}
        total = sum(s["usage_total"]["total_tokens"] for s in sessions)
        return (fleet.get("usage_total") or {}).get("total_tokens") == total

    wait_until(settled, what="the fleet's sum to count every session")
    before_ls, _ = ls_json(herd)
    before = {name: status_json(herd, name)[0] for name in ("priced", "life")}
    assert before["priced"]["usage"]["cost_estimated"] is True
    assert before["priced"]["budget"]["tokens"]["spent"] == 2500
    assert before["life"]["budget"]["tokens"]["spent"] == 600
    assert before["life"]["usage"]["total_tokens"] == 300
    assert before["life"]["fleet"]["budget"]["tokens"]["limit"] == 1000000

    herd.down()  # `down` over the socket: every session stopped, then the daemon
    assert herd.thread is None and not client.ping()

    after_ls, said = ls_json(herd)
    assert "no daemon is running" in said
    for name, status in before.items():
        offline, said = status_json(herd, name)
        assert "no daemon is running" in said
        assert agreed(offline) == agreed(status), name
        assert agreed(after_ls[name]) == agreed(before_ls[name]), name
        assert agreed(after_ls[name]) == agreed(status), name
        # The rest agrees too, but for what only git tells (the offline reader runs no git).
        assert {**offline, "git_note": None} == {**status, "git_note": None}, name
