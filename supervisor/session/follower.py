"""Following a run: its output as it lands, its exit, and its log kept under the cap."""

from __future__ import annotations

import functools
import logging
import os
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import anyio

from agentherd.sessions.adapters import Usage
from agentherd.sessions.budget import limits
from agentherd.sessions.records import Event, RunRecord
from agentherd.sessions.spending import task_runs_usage
from agentherd.sessions.states import State
from agentherd.sessions.status import LeftRunning
from agentherd.sessions.times import iso, utc_now
from agentherd.supervisor.files import logcap
from agentherd.supervisor.files.logguard import LOG_CHECK_MIN_S, LOG_FLOOD_BYTES
from agentherd.supervisor.files.paths import OUTPUT_FILE
from agentherd.supervisor.process import procs, runfolder, runid, runleftovers, spawn
from agentherd.supervisor.session import agentusage, livefiles, resumecheck
from agentherd.supervisor.session.context import Context
from agentherd.supervisor.session.liverun import LiveRun, outcome_name
from agentherd.supervisor.session.pen import Pen

log = logging.getLogger("herd.session")

TAIL_READS_PER_WAKE = 128
"""At most this many reads (of the tailer's chunk size) per wake-up of a run's output reader."""

TAIL_READ_BUDGET_S = 0.05
"""A wake-up stops reading after this long; the rest waits for the next one (the loop serves
every session and every client)."""

LOG_FLOOD_CHECK_S = 0.002
"""How often a flooding log is checked against log_max_bytes, from a worker thread (one lstat
each time; `yes` writes ~2 MB in that time)."""

LOG_CAPPED_EVENT_S = 60.0
"""A log that keeps being cut gets a `log-capped` event at most this often (and one at its end)."""


class Follower:
    """Follows a session's run: reads its output, waits for its exit, keeps its log capped.

    It tells the session what it read (`output_read`) and that the run ended (`exited`); the
    run's end itself is written by the session (`end_of` gives the event and the usage).
    """

    def __init__(
        self,
        ctx: Context,
        pen: Pen,
        arm_log: Callable[[Path], None],
        output_read: Callable[[float, bool], None],
        exited: Callable[[LiveRun], Awaitable[None]],
        run_usage: Callable[[LiveRun], Usage],
    ) -> None:
        self.ctx = ctx
        self.record = pen.record
        self.pen = pen
        self.arm_log = arm_log
        """Have the fleet watcher report the next change of a run's log."""
        self.output_read = output_read
        """(when the newest output was written, monotonic s; True when it showed a step)."""
        self.exited = exited
        """The run's leader ended and its output is read: apply the exit rules (once)."""
        self.run_usage = run_usage
        self.run: LiveRun | None = None
        """The run being followed (or the last one, ended)."""
        self._read_limits: tuple[object, object, bool] | None = None
        self._ended_run: RunRecord | None = None
        """The last run's record as stored, for the status while no run is watched."""
        self.older_logs_bytes = logcap.bytes_before(self.runs_folder, self.record.run)
        """Bytes of the logs of the session's earlier runs."""
        self._compacted_ended = False
        """The ended runs' logs left punched by an earlier daemon were compacted (once)."""

    def watch(self, live: LiveRun) -> None:
        """Follow `live` from now on: its output, its exit and its log's cap."""
        self.run = live
        self._follow_output(live)
        self.ctx.tg.start_soon(self._wait_exit, live)
        live.log_guarded = anyio.Event()
        self.ctx.tg.start_soon(self._guard_log, live, live.log_guarded)
        # Codex and Gemini print usage only when the run ends: their own files tell it sooner.
        self.ctx.tg.start_soon(livefiles.follow, live, self._files_gap_s, self._files_read)

    def ended_runs_usage(self) -> Usage:
        """Usage of the current task's ended runs, as stored (each run is its own process)."""
        handle = self.record.handle
        runs = self.ctx.store.runs(self.pen.config().name) if handle else []
        return task_runs_usage(runs, handle) if handle else Usage()

    async def left_running(self) -> LeftRunning | None:
        """The session and the pids of its run still alive after a stop, or None."""
        run = self.run
        if run is None:
            return None
        record = self.record
        if run.exited.is_set() and record.state != State.STOPPING and record.reason != "unkillable":
            return None  # stopped cleanly: its stop already found nothing left
        found = await anyio.to_thread.run_sync(procs.run_processes, run.identity)
        pids = sorted(p.pid for p in found)
        if not pids:
            return None
        return LeftRunning(session=self.pen.config().name, state=record.state, pids=pids)

    def last_run_record(self) -> RunRecord | None:
        """The current run number's stored record (read once per run number, not per status)."""
        number = self.record.run
        cached = self._ended_run
        if number and (cached is None or cached.run != number or cached.ended_at is None):
            self._ended_run = self.ctx.store.run(self.pen.config().name, number)
        return self._ended_run if number else None

    # ----- watching a run --------------------------------------------------------------------

    def wake(self) -> None:
        """The watcher saw the run's log change: read it now instead of at the next poll."""
        if self.run is not None:
            if self.run.reading is not None:
                self.run.reading.wake()
            self.run.log_grew.set()

    def _follow_output(self, live: LiveRun) -> None:
        """Read new output as it lands, in the fleet's reader, until the final drain."""
        timings = self.ctx.timings
        gap_s = (lambda: timings.terminal_gap_s) if live.config.interactive else self.read_gap_s
        read = functools.partial(self._read_once, live)
        live.reading = self.ctx.reader.follow(read, gap_s, timings.tail_poll_s)

    def _read_once(self, live: LiveRun) -> bool:
        """Parse what is new; keep the last line; True after the final drain of an ended run.

        A chatty log (the last read found output) is simply read again after its rest: its
        watch stays fired, so its writes cost no event, batch or dispatch. A read that finds
        nothing arms the watch and looks once more; then the log waits for its next change.
        """
        if not live.chatty:
            # Armed before the read: a write after the read raises the next wake-up.
            self.arm_log(live.tailer.path)
        got = self._read_new(live)
        if not got and live.chatty:
            live.chatty = False
            self.arm_log(live.tailer.path)
            got = self._read_new(live)
        if live.exited.is_set() and not live.tailer.has_more():
            tail = live.splitter.flush()
            if tail is not None:
                self.take_line(live, tail)
            live.tailer.close()
            live.drained.set()
            live.log_grew.set()  # its guard makes its last check now
            return True
        if got and live.reading is not None:
            live.chatty = True
            live.reading.wake()  # read again after the rest, watched or not
        return False

    def _read_new(self, live: LiveRun) -> bool:
        """`read_output`; True when it read anything."""
        offset, skipped = live.tailer.offset, live.tailer.skipped_bytes
        self.read_output(live)
        return live.tailer.offset != offset or live.tailer.skipped_bytes != skipped

    def read_gap_s(self) -> float:
        """How long a run's log rests after a read: short while a budget limit counts it."""
        timings = self.ctx.timings
        return timings.tail_min_gap_s if self._read_limited() else timings.tail_gap_s

    def _files_gap_s(self) -> float:
        """How long a live run's agent files rest between looks: short while a limit counts."""
        timings = self.ctx.timings
        return timings.agent_files_poll_s if self._read_limited() else timings.agent_files_idle_s

    def _files_read(self) -> None:
        """The run's agent files moved its usage: a step, as output that shows one is."""
        self.output_read(time.monotonic(), True)
        self.pen.touch(True)

    def _read_limited(self) -> bool:
        """True when the session's or the fleet's budget sets a limit its output counts for."""
        budgets = (self.pen.config().budget, self.ctx.fleet_budget)
        cached = self._read_limits
        if cached is not None and cached[0] is budgets[0] and cached[1] is budgets[1]:
            return cached[2]  # asked at every read: the limits change on a reload only
        limited = bool(limits(budgets[0]) or limits(budgets[1]))
        self._read_limits = (*budgets, limited)
        return limited

    def read_output(self, live: LiveRun) -> None:
        """Read and parse what is new in the run's log (bounded per call)."""
        known_id = live.parser.session_id
        parsed_lines = live.parser.parsed_lines
        read_any = decoded = False
        # The log's cap is kept by its guard (`_guard_log`), not checked per read.
        # Bounded work per wake-up, in bytes and in time: `yes` makes a million lines a second.
        deadline = time.monotonic() + TAIL_READ_BUDGET_S
        for _ in range(TAIL_READS_PER_WAKE):
            skipped = live.tailer.skipped_bytes
            data = live.tailer.read_new()
            if live.tailer.skipped_bytes != skipped:  # the cap cut out the rest of that line
                cut = live.splitter.flush()
                if cut is not None:
                    decoded = self.take_line(live, cut) or decoded
            if not data:
                break
            read_any = True
            decoded = self.take_line(live, *live.splitter.feed(data)) or decoded
            if live.tailer.offset >= live.tailer.size_seen or time.monotonic() > deadline:
                # The end of the file as it was (what came since raised the next wake-up: the
                # watch was armed before reading): no second look, nor its replaced-file check.
                break
        if not read_any:
            return
        now_s = time.monotonic()
        written_s = now_s - max(0.0, time.time() - live.tailer.written_at)
        stepped = decoded or live.parser.parsed_lines != parsed_lines or self._read_limited()
        # A stop between two of the agent's steps, not a second late. Text that moved no
        # usage (a plain harness's lines) has nothing to check, limits or not.
        self.output_read(written_s, stepped)
        if resumecheck.due(live):
            live.resume_checked = True
            self.ctx.tg.start_soon(resumecheck.check, self.pen, live)
        new_id = live.parser.session_id
        if new_id and new_id != known_id and new_id != self.record.agent_session_id:
            # Persist the agent's session id the moment it appears: a crash is when it is needed.
            self.record.agent_session_id = new_id
            live.record.agent_session_id = new_id
            self.pen.commit(run=live.record)
        else:
            self.pen.touch(True)

    def take_line(self, live: LiveRun, *lines: bytes) -> bool:
        """Parse lines, each decoded once; the summary a person reads is made when read.
        True when any of them decoded (only such a line, or a counted parse, moves usage)."""
        values = live.parser.decode_lines(lines)
        live.shown.offer(lines, values)
        return values.count(None) != len(values)

    async def _wait_exit(self, live: LiveRun) -> None:
        """Learn how the run's leader ended (our child: wait; adopted: poll), then apply policy."""
        if live.process is not None:
            status = await live.process.wait()
            info = runid.decode_status(status)
        else:
            # With its leader unknown, a run lives while its lock is held or its cgroup populated.
            alive = (
                procs.leader_alive
                if live.identity.pid is not None
                else functools.partial(procs.run_alive, folder=live.folder)
            )
            while await anyio.to_thread.run_sync(alive, live.identity):
                await anyio.sleep(self.ctx.timings.adopt_poll_s)
            info = runfolder.read_exit_file(live.folder) or runid.ExitInfo(None, None)
        live.exit = info
        live.exited.set()
        if live.reading is not None:
            live.reading.wake_now()  # its last output is read at once, not after a rest
        with anyio.move_on_after(self.ctx.timings.drain_wait_s):
            await live.drained.wait()
        await self.exited(live)

    async def stop_run(self, live: LiveRun, kill: bool) -> bool:
        """Stop signal + grace (or SIGKILL at once) to the whole run; False if any survived."""
        config, timings = self.pen.config(), self.ctx.timings
        gone = await procs.stop_tree(
            live.identity,
            signal.SIGKILL if kill else config.stop_signal_number,
            config.stop_grace,
            timings.kill_wait_s,
            timings.stop_poll_s,
            continue_first=live.paused,
            leader_exited=live.exited if live.process is not None else None,
        )
        with anyio.move_on_after(timings.kill_wait_s):
            await live.exited.wait()
        return gone

    async def end_of(self, live: LiveRun) -> tuple[Event, Usage] | None:
        """The run's end as the session writes it (its record filled in), once; else None."""
        if live.record.ended_at is not None:
            return None
        with anyio.move_on_after(self.ctx.timings.drain_wait_s):
            await live.drained.wait()
        info = live.exit or runid.ExitInfo(None, None)
        outcome = live.parser.outcome
        live.record.ended_at = iso(utc_now())
        config = self.pen.config()
        # Killed before its result: its spend is in the agent's records (a plain command has none);
        # a finished Codex run's refused commands are in its rollout (stdout can miss them).
        if agentusage.reads_agent_files(live.parser):
            limit_s = self.ctx.timings.agent_files_read_s
            await live.agent_files.read(live.parser, live.record, live.config, limit_s)
            outcome = live.parser.outcome
        agentusage.log_adapter_warnings(live.parser, live.record.run, config.name)
        live.record.exit_code = info.exit_code
        live.record.signal = info.signal
        usage = self.run_usage(live)  # never lower than seen, a missing cost estimated
        if outcome is None and live.parser.awaiting_answer:  # killed while the model answered
            usage = replace(usage, uncounted_requests=1)
        live.record.usage = usage.to_json()
        live.record.last_line = live.last_line
        live.record.outcome = outcome_name(outcome, config.agent, info, live.config.interactive)
        event = self.pen.event(
            "run-exited",
            f"run {live.record.run} ended: {info.describe()}"
            + ("" if live.record.outcome == info.describe() else f" ({live.record.outcome})"),
            live.record.run,
            exit_code=info.exit_code,
            signal=info.signal,
            outcome=live.record.outcome,
        )
        return event, usage

    async def sweep(self, live: LiveRun) -> bool:
        """Stop anything of an ended run still alive, and remove its cgroup; True when nothing
        of the run is left (nothing writes its log any more)."""
        config = self.pen.config()
        gone = True
        # One worker hop for the quick look and, when nothing is left, the cgroup's removal.
        if await anyio.to_thread.run_sync(
            runleftovers.settle, live.identity, not live.record.stop_requested
        ):  # the full scan only when the quick look found a candidate
            leftovers = await anyio.to_thread.run_sync(procs.run_processes, live.identity)
            if leftovers:
                gone = await procs.stop_tree(
                    live.identity,
                    config.stop_signal_number,
                    config.stop_grace,
                    self.ctx.timings.kill_wait_s,
                    self.ctx.timings.stop_poll_s,
                )
            if live.identity.cgroup is not None:
                await anyio.to_thread.run_sync(spawn.remove_cgroup, live.identity)
        return gone

    # ----- logs ------------------------------------------------------------------------------

    @property
    def runs_folder(self) -> Path:
        """The session's run folders' parent."""
        return self.ctx.state_dir / "runs" / self.pen.config().name

    def log_bytes(self) -> int:
        """Bytes of output kept on disk for this session, across runs (no disk scan)."""
        current = 0
        if self.run is not None:
            current = max(0, self.run.tailer.offset - self.run.log_cap.dropped_bytes)
        return self.older_logs_bytes + current

    async def compact_log(self, live: LiveRun) -> None:
        """Once a run is over (its guard done, nothing of it alive): its log, and any older one
        left punched, rewritten as the bytes it keeps (nothing reads them by offset any more)."""
        if live.log_guarded is not None:
            await live.log_guarded.wait()
        try:
            punched = logcap.punched(os.lstat(live.folder / OUTPUT_FILE))
        except OSError:
            return
        if punched:  # most logs never passed the cap: no worker hop for them
            await self._compact_logs(below_run=live.record.run + 1)

    async def _compact_logs(self, below_run: int) -> None:
        """Compact the punched logs of the session's runs before `below_run`, off the loop."""
        name = self.pen.config().name
        going = threading.Event()  # the daemon going down: its copies end, the next one's go on
        try:
            done = await anyio.to_thread.run_sync(
                logcap.compact_ended,
                self.runs_folder,
                below_run,
                going.is_set,
                abandon_on_cancel=True,
            )
        finally:
            going.set()
        for number, removed in done:
            log.info(
                "%s: run %d's log compacted (%d bytes of holes taken out)", name, number, removed
            )

    async def _guard_log(self, live: LiveRun, guarded: anyio.Event) -> None:
        """Keep the running log within log_max_bytes until its run drained; then say so."""
        try:
            await self._keep_capped(live)
        finally:
            guarded.set()

    async def _keep_capped(self, live: LiveRun) -> None:
        """Keep the running log within log_max_bytes between tail reads; often while it floods."""
        grew, room = self._cap_log(live)
        while not live.drained.is_set():
            if grew >= LOG_FLOOD_BYTES and self.ctx.log_guards.available_tokens >= 1:
                stop = threading.Event()
                try:
                    await anyio.to_thread.run_sync(
                        live.log_cap.guard_flood,
                        self.pen.config().log_max_bytes,
                        LOG_FLOOD_CHECK_S,
                        LOG_FLOOD_BYTES,
                        stop,
                        abandon_on_cancel=True,
                        limiter=self.ctx.log_guards,
                    )
                finally:
                    stop.set()
            elif grew >= LOG_FLOOD_BYTES:
                await anyio.sleep(LOG_CHECK_MIN_S)
            elif grew:
                # A growing log is looked at again before it can pass the cap at the fastest
                # planned rate, in the fleet's passes (one wake-up for every chatty log), until
                # a look finds it quiet or flooding.
                grew, room = await self.ctx.log_guard.follow(
                    functools.partial(self._cap_log, live), room, live.drained.is_set
                )
                live.log_grew = anyio.Event()
                continue
            else:
                # Arm the log's watch, then look once more: a write after that raises an event
                # even while the reader rests with the watch fired. A quiet log waits for it.
                self.arm_log(live.tailer.path)
                grew, room = self._cap_log(live)
                if grew:
                    continue
                # No poll: the slow pass looks at every log once a minute (`check_log_cap`).
                await live.log_grew.wait()
            live.log_grew = anyio.Event()
            grew, room = self._cap_log(live)
        self._cap_log(live)
        self._report_log_cap(live, final=True)

    def _cap_log(self, live: LiveRun) -> tuple[int, int]:
        """Cut the running log's middle if it passed the cap; return its growth and room left."""
        cap = live.log_cap
        before = cap.dropped_bytes
        grew, room = cap.check(self.pen.config().log_max_bytes)
        if cap.cut_to is not None:  # cut back (no holes here): read on from the cut
            live.tailer.offset = min(live.tailer.offset, cap.cut_to)
            cap.cut_to = None
        if cap.dropped_bytes > before:
            self._report_log_cap(live, final=False)
        return grew, room

    def _report_log_cap(self, live: LiveRun, final: bool) -> None:
        """A `log-capped` event when a run's log is first cut, then at most once a minute."""
        dropped = live.log_cap.dropped_bytes
        if dropped <= live.log_capped_reported:
            return
        now = time.monotonic()
        first = live.log_capped_reported == 0
        if not (final or first or now - live.log_capped_at >= LOG_CAPPED_EVENT_S):
            return
        live.log_capped_reported = dropped
        live.log_capped_at = now
        self.pen.commit(
            self.pen.event(
                "log-capped",
                f"run {live.record.run}'s log passed log_max_bytes "
                f"({self.pen.config().log_max_bytes} bytes): {dropped} bytes dropped from its "
                "middle "
                f"{'in all' if final else 'so far'}, its start and newest output kept",
                live.record.run,
                dropped_bytes=dropped,
                final=final,
            )
        )

    def check_log_cap(self) -> None:
        """Delete the oldest runs' logs until the session fits `log_max_bytes` (slow path); the
        first time, compact the logs of ended runs no daemon compacted (it stopped first)."""
        live = self.run is not None and self.run.record.ended_at is None
        below_run = self.record.run + (0 if live else 1)  # a first run has no older log
        if not self._compacted_ended and below_run > 1:  # (no worker hop at a fleet's start)
            self._compacted_ended = True
            self.ctx.tg.start_soon(self._compact_logs, below_run)
        if self.run is not None and not self.run.drained.is_set():
            grew, _ = self._cap_log(self.run)
            if grew:  # output the watcher did not report (inotify drops events when busy)
                self.wake()
        deleted, self.older_logs_bytes = logcap.enforce_cap(
            self.runs_folder, self.pen.config().log_max_bytes, self.record.run
        )
        for number, size in deleted:
            self.pen.commit(
                self.pen.event(
                    "log-capped",
                    f"deleted the log of run {number} ({size} bytes) to stay under log_max_bytes",
                    number,
                )
            )
