"""Stall detection: no output, progress or commit for `stall` warns once; pauses do not count."""

from __future__ import annotations

from conftest import Herd, script, wait_until

from agentherd.sessions.drift import StallClock


def test_the_stall_clock_stops_while_paused() -> None:
    clock = StallClock(last_activity_s=100.0)
    assert clock.idle_s(130.0) == 30.0
    clock.pause(130.0)
    assert clock.idle_s(500.0) == 30.0, "paused time is not counted"
    clock.resume(500.0)
    assert clock.idle_s(510.0) == 40.0
    assert not clock.newly_stalled(510.0, 60.0)
    assert clock.newly_stalled(530.0, 60.0)
    assert not clock.newly_stalled(531.0, 60.0), "one warning per stall"
    clock.activity(532.0)
    assert clock.idle_s(532.0) == 0.0 and not clock.warned


def test_output_read_late_ends_a_stall_only_if_written_after_it() -> None:
    """Output is read in batches: a line written at 101 and read at 130 (past a 20 s stall
    raised at 125) leaves the agent silent since 101, so the stall stays; one written at 126,
    after the warning, ends it even when read late, and the clock counts from the read."""
    clock = StallClock(last_activity_s=100.0)
    assert clock.newly_stalled(125.0, 20.0)
    assert not clock.output_written(101.0, 130.0, 20.0)
    assert clock.warned and clock.idle_s(130.0) == 29.0
    assert clock.output_written(126.0, 150.0, 20.0)
    assert not clock.warned and clock.idle_s(150.0) == 0.0
    assert not clock.newly_stalled(160.0, 20.0), "not reopened by the late read"
    assert clock.newly_stalled(171.0, 20.0)
    assert clock.output_written(170.0, 172.0, 20.0), "written before, but silent under 20 s"
    assert not clock.output_written(300.0, 172.0, 20.0), "no warning open: nothing to end"
    assert clock.idle_s(172.0) == 0.0, "a clock ahead of now counts as now"


def test_a_silent_agent_is_reported_stalled_once(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "quiet"
        command = {
        script('''
            import time
            print("starting", flush=True)
            time.sleep(60)
        ''')
    }
        budget = {{ stall = "2s" }}
        stop_grace = "1s"
    """)
    # 2 s, not less: a loaded machine read "starting" after a shorter stall had fired, and the
    # output closed the warning before the test looked.
    client = herd.start()
    client.call("start", name="quiet")
    stalled = wait_until(lambda: herd.events("quiet", "stalled"))
    assert "no output, progress entry or commit" in stalled[0]["message"]
    assert any(w["kind"] == "stalled" for w in herd.status("quiet")["warnings"])
    assert len(herd.events("quiet", "stalled")) == 1
    client.call("stop", name="quiet", socket_timeout_s=None)


def test_a_paused_agent_is_not_stalled(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "napping"
        command = {
        script('''
            import time
            while True:  # output until paused and again once resumed: silent only while paused
                print("working", flush=True)
                time.sleep(0.05)
        ''')
    }
        budget = {{ stall = "3s" }}
        stop_grace = "1s"
    """)
    client = herd.start()
    client.call("start", name="napping")
    wait_until(lambda: herd.status("napping")["last_line"] == "working", what="output")
    client.call("pause", name="napping")
    # Enough reconcile passes to span twice the stall threshold go by while paused. The agent
    # writes until the pause and again on resuming: a loaded machine that delays the pause or
    # the passes after the resume makes no silence of its own (a silent agent and a 1 s
    # threshold made one: a true stall before the pause, or after the resume).
    first = client.call("info")["reconcile_passes"]
    wanted = first + int(2 * 3.0 / herd.timings.reconcile_s) + 1
    wait_until(lambda: client.call("info")["reconcile_passes"] >= wanted)
    client.call("resume", name="napping")
    resumed_at = client.call("info")["reconcile_passes"]
    wait_until(lambda: client.call("info")["reconcile_passes"] >= resumed_at + 2)
    assert herd.events("napping", "stalled") == [], "the paused stretch counted as a stall"
    client.call("stop", name="napping", socket_timeout_s=None)
