"""Launching a session's runs: the run record written first, the spawn, the live run."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable
from pathlib import Path

import anyio

from agentherd.sessions import launchspec
from agentherd.sessions.adapters import make_parser
from agentherd.sessions.lifecycle import Trigger
from agentherd.sessions.records import Event, PendingMessage, RunRecord, TaskRecord
from agentherd.sessions.states import State
from agentherd.sessions.times import iso, utc_now
from agentherd.supervisor.files.paths import run_dir
from agentherd.supervisor.git import gitops
from agentherd.supervisor.process import runfolder, runid, spawn
from agentherd.supervisor.session import agentusage, inputwait
from agentherd.supervisor.session.context import Context
from agentherd.supervisor.session.errors import SessionError
from agentherd.supervisor.session.liverun import LiveRun
from agentherd.supervisor.session.pen import Pen

log = logging.getLogger("herd.session")


class Launcher:
    """Starts a session's runs; the session commits each step through its pen."""

    def __init__(
        self,
        ctx: Context,
        pen: Pen,
        plan_passing: Callable[[], int | None],
        started: Callable[[], None],
        watch: Callable[[LiveRun], None],
    ) -> None:
        self.ctx = ctx
        self.record = pen.record
        self.pen = pen
        self.plan_passing = plan_passing
        """Plan items passing now (None without a plan): a run remembers it at its start."""
        self.started = started
        """The run is spawned: its stall clock starts (before it is written running)."""
        self.watch = watch
        """Follow the new run."""

    def new_task(self) -> TaskRecord:
        """Begin a task on the record (its first run is the next one): counts start afresh."""
        first_run = self.record.run + 1
        handle = f"{self.pen.config().name}/{first_run}"
        self.record.handle = handle
        self.record.restarts = 0
        self.record.backoff_step = 0
        self.record.crash_times = []
        self.record.idle_runs = 0
        self.record.task_started_at = iso(utc_now())
        return TaskRecord(
            handle=handle,
            session=self.pen.config().name,
            first_run=first_run,
            state=State.STARTING,
            started_at=self.record.task_started_at or "",
        )

    async def launch(self, mode: str, env_extra: dict[str, str], by: Trigger | None = None) -> None:
        """Start the next run: `resume` when asked and possible, else `command`.

        `by` is the move into `starting` (an automatic restart); a new task is in it already.
        """
        config = self.pen.config()
        number = self.record.run + 1
        message = self.record.pending_message
        if message is not None and launchspec.takes_messages(config):
            mode = "resume"  # a sent message is for the conversation, whatever the restart
        else:
            message = None
        argv, mode = launchspec.run_argv(
            config,
            mode,
            number,
            self.record.agent_session_id,
            env_extra,
            message.text if message is not None else None,
        )
        taken = message if mode == "resume" else None  # no conversation yet: it waits on
        git_dir, git_dir_id = await self._repository(number, config.cwd)
        folder = run_dir(self.ctx.state_dir, config.name, number)
        forgotten = self.ctx.store.run(config.name, number) is None
        tag = uuid.uuid4().hex
        # On the loop: a stat (and rarely a rename) and a mkdir, each microseconds, where a hop
        # to a worker and back waited milliseconds on a busy loop before every relaunch.
        cgroup = _prepare_run(folder if forgotten else None, tag)
        env = launchspec.run_environment(
            os.environ, config, number, self.record.restarts, env_extra
        )
        if config.interactive:  # its hooks tell when its agent waits for a person
            hook_argv, hook_env = inputwait.prepare(folder, config, env)
            argv, env = launchspec.with_flags(argv, hook_argv), {**env, **hook_env}
        record = RunRecord(
            session=config.name,
            run=number,
            handle=self.record.handle or "",
            argv=argv,
            mode=mode,
            cwd=str(config.cwd),
            git_dir=git_dir,
            git_dir_id=git_dir_id,
            tag=tag,
            cgroup=cgroup,
            started_at=iso(utc_now()),
            # A resumed run belongs to the agent's thread from its start (Codex counts per thread).
            agent_session_id=self.record.agent_session_id if mode == "resume" else None,
            message_id=taken.id if taken is not None else None,
        )
        self.record.run = number
        if taken is not None:  # used once: gone from the record in the run record's commit
            self.record.pending_message = None
        self.record.passing_at_run_start = self.plan_passing()
        # Written before the spawn: a daemon killed right after it finds the run by its tag.
        delivered = () if taken is None else (_delivered(self.pen, taken, number),)
        if by is None:
            self.pen.commit(*delivered, run=record)
        else:
            self.pen.transition(State.STARTING, None, *delivered, by=by, run=record)
        try:
            launched = await spawn.launch(
                argv, config.cwd, env, folder, tag, cgroup, config.interactive
            )
        except Exception as exc:  # any failure to spawn ends the run; it must never stay pid-less
            await self._spawn_failed(record, argv, exc)
            return
        record.pid = launched.identity.pid
        record.pgid = launched.identity.pgid
        record.create_time = launched.identity.create_time
        handle = self.record.handle
        task = self.ctx.store.task(handle) if handle else None
        if task is not None and task.state != State.RUNNING:
            task = task.model_copy(update={"state": State.RUNNING})
        # A new run starts a new stall clock (the last one may have stopped at a pause or a gate).
        self.started()
        self.pen.transition(
            State.RUNNING,
            None,
            self.pen.event(
                "run-started",
                f"run {number} started ({mode}): pid {record.pid}",
                number,
                pid=record.pid,
                argv=argv,
                mode=mode,
            ),
            by=Trigger.SPAWNED,
            run=record,
            task=task,
        )
        known_id = self.record.agent_session_id if mode == "resume" else None
        live = LiveRun(
            record,
            launched.identity,
            folder,
            make_parser(
                config.agent,
                session_id=known_id,
                thread_usage=agentusage.thread_usage(self.ctx.store, config.name, known_id),
            ),
            launched.process,
            config,
        )
        self.watch(live)

    async def _repository(self, number: int, cwd: Path) -> tuple[str, str]:
        """The repository the run works in: the one its task began in (a restart's agent may
        have pointed `.git` elsewhere meanwhile), found afresh when the task begins."""
        previous = self.ctx.store.run(self.pen.config().name, number - 1) if number > 1 else None
        if (
            previous is not None
            and previous.handle == self.record.handle
            and previous.cwd == str(cwd)
            and previous.git_dir is not None
        ):
            return previous.git_dir, previous.git_dir_id or ""
        return await anyio.to_thread.run_sync(gitops.identity, cwd)

    async def refuse_start(self, own_folder: Path | None = None) -> None:
        """Refuse a start beside another session's agent, or beside processes of an old run
        (`own_folder`: the run a restart stops itself)."""
        config = self.pen.config()
        await self.refuse_if_taken(self.ctx.worktree_user(config.name, config.cwd), own_folder)

    async def refuse_if_taken(self, other: str | None, own_folder: Path | None) -> None:
        """Refuse a start beside another session's agent (`other`) or an old run's processes;
        `own_folder` is the run a restart stops itself, so it does not count.

        A run folder whose `alive.lock` is held has live processes in this worktree: leftovers
        of an earlier run, or a run no state remembers (state.db deleted while agents ran).
        """
        config = self.pen.config()
        name = config.name
        if other is not None:
            raise SessionError(
                f"cannot start {name}: session {other} is running in the same worktree "
                f"({config.cwd}); stop it first (`herd stop {other}`)"
            )
        runs_folder = self.ctx.state_dir / "runs" / name
        held = await anyio.to_thread.run_sync(runfolder.held_run_folders, runs_folder)
        held = [folder for folder in held if folder != own_folder]
        if not held:
            return
        users = await anyio.to_thread.run_sync(runfolder.describe_users, held[0])
        raise SessionError(
            f"cannot start {name}: processes of an earlier run still hold {held[0]} "
            f"({users}); stop them, then start again"
        )

    async def _spawn_failed(self, record: RunRecord, argv: list[str], exc: Exception) -> None:
        """Record a run that never started as ended, and fail its task with the reason."""
        if not isinstance(exc, (OSError, ValueError, spawn.RunFolderBusy)):
            log.exception("starting run %d of %s failed", record.run, record.session)
        await anyio.to_thread.run_sync(spawn.remove_cgroup, identity_of(record))
        record.ended_at = iso(utc_now())
        record.outcome = "spawn-failed"
        self.pen.commit(run=record)
        by = Trigger.SPAWN_FAILED
        if isinstance(exc, spawn.RunFolderBusy):
            self.pen.end_task(State.FAILED, "run-folder-busy", f"not started: {exc}", by)
        else:
            self.pen.end_task(State.FAILED, "spawn-failed", f"cannot start {argv[0]!r}: {exc}", by)


def _delivered(pen: Pen, message: PendingMessage, number: int) -> Event:
    """The event of a sent message taken by run `number` as its prompt."""
    return pen.event(
        "message-delivered",
        f"run {number} resumed the conversation with the message sent at {message.at} "
        f"(from {message.origin})",
        number,
        message_id=message.id,
        origin=message.origin,
    )


def _prepare_run(forgotten: Path | None, tag: str) -> str | None:
    """Set aside the `forgotten` run folder (when given), then make the run's cgroup."""
    if forgotten is not None:
        runfolder.set_aside_forgotten(forgotten)
    return spawn.new_cgroup(tag)


def identity_of(record: RunRecord) -> runid.RunIdentity:
    """What the store knows of a run's processes; a PID of 1 or below is no PID at all."""
    pid = record.pid if record.pid is not None and record.pid > 1 else None
    pgid = record.pgid if pid is not None else None
    return runid.RunIdentity(pid, pgid or pid, record.create_time, record.tag, record.cgroup)
