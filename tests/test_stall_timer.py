"""A stall is warned about when the silence reaches its limit, not at the next slow pass."""

from __future__ import annotations

from dataclasses import replace

from conftest import FAST, Herd, script, wait_until

SILENT_SCRIPT = """
    import time
    print("starting", flush=True)
    time.sleep(120)
"""
"""An agent that says one line and then nothing."""


def test_a_stall_is_warned_about_long_before_the_slow_pass(herd: Herd) -> None:
    herd.timings = replace(FAST, reconcile_s=600.0)  # the slow pass never comes in this test
    work = herd.root / "work"
    work.mkdir()
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{work}"
        command = {script(SILENT_SCRIPT)}
        budget = {{ stall = "1s" }}
        stop_grace = "1s"
    """)
    client = herd.start()
    client.call("start", name="api")
    [stalled] = wait_until(lambda: herd.events("api", "stalled"), what="the stall warning")
    assert stalled["data"]["idle_s"] >= 1.0, "not before the silence reached its limit"
    assert "stalled" in [w["kind"] for w in herd.status("api")["warnings"]]
    client.call("stop", name="api", socket_timeout_s=None)
