"""The fleet's run logs are read and kept under their cap by one task each, not one per run: a
rested read waits for its gap, shared ticks batch the fleet's reads, a chatty log costs no
watcher event per write, and its output still arrives whole (issue 14, CPU at 200 x 50)."""

from __future__ import annotations

import functools
import time
from pathlib import Path

import anyio
import pytest
from conftest import FAST, Herd, script, wait_until

from agentherd.supervisor.files.fleetreader import STALE_ENTRIES_MAX, FleetReader
from agentherd.supervisor.files.logguard import LOG_FLOOD_BYTES, FleetLogGuard

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def wait_for(predicate: object, timeout_s: float = 10.0) -> None:
    with anyio.fail_after(timeout_s):
        while not predicate():  # type: ignore[operator]
            await anyio.sleep(0.005)


async def test_a_woken_log_is_read_after_its_gap_and_the_fleet_shares_passes() -> None:
    gap_s = 0.2
    gaps_s = [gap_s] * 10  # asked at each wake-up: the last part gives the first log a long rest
    reads: list[tuple[int, float]] = []

    def read(index: int) -> bool:
        reads.append((index, time.monotonic()))
        return index == 0 and len(reads) > 20  # the first log's run ends after round two

    async with anyio.create_task_group() as tg:
        reader = FleetReader(tg)
        readings = [
            reader.follow(functools.partial(read, i), functools.partial(gaps_s.__getitem__, i), 60)
            for i in range(10)
        ]
        await wait_for(lambda: len(reads) == 10)  # every log read at once when followed
        first_passes = reader.passes
        last_read = max(at for _, at in reads)
        for reading in readings:
            reading.wake()
        await wait_for(lambda: len(reads) == 20)
        assert min(at for _, at in reads[10:]) >= last_read + gap_s - 0.001  # rested first
        assert reader.passes - first_passes <= 2  # ten reads on one tick (or two)
        # A run's exit: read at once, whatever its rest. The rest is now far longer than the
        # wait, so the read proves it without timing the test's own task (a loaded machine can
        # stall it past a short gap: CI).
        gaps_s[0] = 3600.0
        readings[0].wake()
        readings[0].wake_now()
        await wait_for(lambda: len(reads) == 21)
        readings[0].wake()
        readings[0].wake_now()
        await anyio.sleep(gap_s * 2)
        assert len(reads) == 21  # done: never read again
        tg.cancel_scope.cancel()


async def test_a_quiet_log_woken_often_leaves_no_pile_of_superseded_polls() -> None:
    reads: list[int] = []
    async with anyio.create_task_group() as tg:
        reader = FleetReader(tg)
        reading = reader.follow(lambda: reads.append(1) is None and False, lambda: 0.0, 60.0)
        for count in range(1, 3 * STALE_ENTRIES_MAX):
            await wait_for(lambda count=count: len(reads) == count)  # type: ignore[misc]
            reading.wake()  # each read left a poll a minute out; this read comes sooner
        assert reader.queued <= STALE_ENTRIES_MAX + 2 * reader.following + 1
        tg.cancel_scope.cancel()


ROOM_100_MS = (1 << 30) // 10
"""Room under the cap the fastest planned writer fills in 0.1 s: a look every 0.1 s."""


async def test_growing_logs_are_checked_in_shared_passes_until_quiet_or_flooding() -> None:
    looks = [0] * 20

    def check(index: int) -> tuple[int, int]:
        looks[index] += 1
        if index == 19 and looks[index] == 2:
            return LOG_FLOOD_BYTES, 1 << 20  # flooding: handed back to its own guard
        if looks[index] == 2:
            return 0, ROOM_100_MS  # one look between two writes: not quiet yet
        return (100, ROOM_100_MS) if looks[index] < 5 else (0, 1 << 20)

    results: dict[int, tuple[int, int]] = {}
    ended = [False]
    async with anyio.create_task_group() as tg:
        guard = FleetLogGuard(tg)

        async def follow(index: int, room: int) -> None:
            look = functools.partial(check, index)
            results[index] = await guard.follow(look, room, lambda: ended[0])

        for index in range(20):
            tg.start_soon(follow, index, ROOM_100_MS)
        await wait_for(lambda: len(results) == 20)
        assert results[19] == (LOG_FLOOD_BYTES, 1 << 20) and looks[19] == 2
        # Quiet once two looks in a row found no growth: the 5th and the 6th.
        assert all(results[i] == (0, 1 << 20) and looks[i] == 6 for i in range(19))
        assert guard.checks == 19 * 6 + 2
        assert guard.passes <= guard.checks / 4  # most passes looked at many logs
        # A run that drained leaves the passes without a look. It has drained before it is
        # followed: setting `ended` after `follow` began raced the guard's pass on a loaded
        # machine (the test's task stalled past the second of room: CI, 2026-12-02).
        ended[0] = True
        del results[0]
        tg.start_soon(follow, 0, 1 << 30)  # a second of room: due in a second
        await wait_for(lambda: 0 in results)
        assert results[0] == (0, 0) and looks[0] == 6  # ended: finished without a look
        assert guard.followed == 0


CHATTY = script("""
    import time
    for index in range(150):
        print(f"line {index}", flush=True)
        time.sleep(0.02)
    print("last", flush=True)
    time.sleep(120)
""")


def test_a_chatty_log_is_read_without_a_watcher_event_per_write(tmp_path: Path) -> None:
    herd = Herd(tmp_path, FAST)
    herd.write(
        f'[[session]]\nname = "chatty"\ncommand = {CHATTY}\nrestart = "never"\ncwd = "."\n'
        'stop_grace = "2s"\n'
    )
    herd.start()
    try:
        assert herd.daemon is not None and herd.daemon.watcher is not None
        reader, watcher = herd.daemon.ctx.reader, herd.daemon.watcher
        herd.client.call("start", name="chatty")
        wait_until(lambda: herd.status("chatty")["last_line"].startswith("line"), what="output")
        reads, batches = reader.reads, watcher.batches
        status = wait_until(
            lambda: (s := herd.status("chatty"))["last_line"] == "last" and s, what="last line"
        )
        assert status["last_line"] == "last"
        read_since, batches_since = reader.reads - reads, watcher.batches - batches
        assert read_since >= 4, read_since  # ~3 s of output at a read every 0.5 s
        # Each read of a chatty log used to be raised by a watcher event (one batch a read, or
        # more); now only a read that found nothing (the agent held up on a loaded machine)
        # arms the watch again.
        assert batches_since <= read_since * 2 / 3, (batches_since, read_since)
    finally:
        herd.down()
