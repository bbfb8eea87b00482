"""Agent processes: launch into their own group with output to a file, find them, stop the tree."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import psutil
from anyio.abc import Process

from agentherd.supervisor.files import agentfiles
from agentherd.supervisor.files.paths import OUTPUT_FILE
from agentherd.supervisor.process import ancestry, cgroups, gonecheck, proctable

log = logging.getLogger("herd.procs")

EXIT_FILE = "exit_status"
EXIT_FILE_MAX_BYTES = 64
"""The wrapper writes one number; anything longer is not its file."""
LOCK_FILE = "alive.lock"
TAG_VAR = "HERD_RUN_TAG"
CGROUP_VAR = "HERD_CGROUP"

# The wrapper first moves itself into the run's cgroup (when it has one), so everything it
# starts is inside before it exists. It stays the group leader so a new daemon can learn how a
# run it did not start ended. It traps (not ignores) the usual stop signals: a trap is reset in
# the exec'd agent, an ignored signal would be inherited. It records the status after the exit.
_WRAPPER = (
    'if [ -n "$HERD_CGROUP" ]; then { echo $$ > "$HERD_CGROUP/cgroup.procs"; } 2>/dev/null; fi; '
    'trap : TERM INT HUP QUIT USR1 USR2; "$@"; s=$?; '
    'printf "%s\\n" "$s" > "$HERD_RUN_DIR/exit_status"; exit $s'
)
# The status is written in place, by the shell itself: an `mv` from a temporary name cost a
# fork and exec between the agent's exit and the wrapper's, on every crash's relaunch. No
# reader needs the rename: each reads the file only once the wrapper is gone (its leader, or
# the run's lock that it holds), and a file cut short reads as no status (exit unknown).

AGENT_EXEC_WAIT_S = 5.0
"""A launch waits at most this long for the wrapper to exec the agent (milliseconds normally)."""
AGENT_EXEC_POLL_S = 0.005
CHILD_FULL_SCAN_EVERY = 8
"""Every this many polls for the agent's exec, look at every process, not just newer PIDs."""

CREATE_TIME_SLACK_S = 0.05
"""psutil's start times are rounded to clock ticks: two readings of one process differ this much."""


@dataclass(frozen=True)
class RunIdentity:
    """Enough to find every process of a run again, and never to signal a recycled PID.

    `pid`/`pgid`/`create_time` are None when the leader was never learned (a daemon died
    between recording the run and spawning it): then only the tag and the cgroup find it.
    """

    pid: int | None
    pgid: int | None
    create_time: float | None
    tag: str
    cgroup: str | None = None


class RunFolderBusy(Exception):
    """The run's folder is held by a live process: a run that no state remembers still runs."""


@dataclass(frozen=True)
class ExitInfo:
    """How a run's leader ended: an exit code, a signal name, or neither when unknown."""

    exit_code: int | None
    signal: str | None

    @property
    def clean(self) -> bool:
        """Exited on its own with code 0."""
        return self.exit_code == 0 and self.signal is None

    def describe(self) -> str:
        """`exit 1`, `signal SIGKILL` or `exit unknown`."""
        if self.signal:
            return f"signal {self.signal}"
        return f"exit {self.exit_code}" if self.exit_code is not None else "exit unknown"


def signal_name(number: int) -> str:
    """SIGTERM for 15, or `SIG<n>` for a number with no name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIG{number}"


def decode_status(status: int | None) -> ExitInfo:
    """Turn a wait status (negative = killed by signal) or a shell's 128+N into ExitInfo."""
    if status is None:
        return ExitInfo(None, None)
    if status < 0:
        return ExitInfo(None, signal_name(-status))
    if 128 < status < 128 + 65:
        return ExitInfo(None, signal_name(status - 128))
    return ExitInfo(status, None)


def read_exit_file(folder: Path) -> ExitInfo | None:
    """The exit status the wrapper wrote for a run, or None when it never wrote one."""
    try:
        # The run folder is reachable by the agent: never block on a FIFO planted there.
        text = agentfiles.read_regular(folder / EXIT_FILE, EXIT_FILE_MAX_BYTES)
        return decode_status(int(text.strip()))
    except (OSError, ValueError):
        return None


@dataclass
class Launched:
    """A run just started by this daemon."""

    process: Process
    identity: RunIdentity


def set_aside_forgotten(folder: Path) -> None:
    """Rename a run folder no state remembers (state.db was lost), so its log is kept apart.

    A folder whose lock is held is left where it is: its run lives, and `launch` refuses it.
    """
    if folder.exists() and not lock_held(folder):
        aside = folder.with_name(f"{folder.name}.forgotten-{time.time_ns()}")
        try:
            folder.rename(aside)
        except OSError as exc:  # the run still starts, appending to the old log
            log.warning("cannot set aside %s: %s", folder, exc)


def new_cgroup(tag: str) -> str | None:
    """Make the cgroup a run will move into, or None where the machine does not allow it."""
    path = cgroups.create(tag)
    return str(path) if path is not None else None


def remove_cgroup(identity: RunIdentity) -> None:
    """Remove the run's cgroup once nothing is left in it."""
    cgroups.remove(identity.cgroup)


async def launch(
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    folder: Path,
    tag: str,
    cgroup: str | None = None,
) -> Launched:
    """Start `argv` in its own session, stdin /dev/null, stdout+stderr appended to output.log.

    The run holds `alive.lock` (inherited by every descendant) for as long as any of it lives;
    a lock already held means a run no state remembers still lives there: RunFolderBusy, never
    a wait and never a second agent. Raises OSError when the program cannot be started.
    """
    folder.mkdir(parents=True, exist_ok=True)
    lock_fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # never block the event loop
    except BlockingIOError:
        os.close(lock_fd)
        users = await anyio.to_thread.run_sync(describe_users, folder)
        raise RunFolderBusy(
            f"processes of an earlier run still hold {folder} ({users}); "
            "stop them, then start again"
        ) from None
    try:
        with contextlib.suppress(FileNotFoundError):
            (folder / EXIT_FILE).unlink()
        full_env = {**env, "HERD_RUN_DIR": str(folder), TAG_VAR: tag, "PYTHONUNBUFFERED": "1"}
        full_env.pop(CGROUP_VAR, None)  # never an outer run's (herd under herd)
        if cgroup is not None:
            full_env[CGROUP_VAR] = cgroup
        _check_program(argv, cwd, full_env)
        log_fd = os.open(folder / OUTPUT_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            process = await anyio.open_process(
                ["/bin/sh", "-c", _WRAPPER, "herd-run", *argv],
                stdin=subprocess.DEVNULL,
                stdout=log_fd,
                stderr=log_fd,
                cwd=cwd,
                env=full_env,
                start_new_session=True,
                pass_fds=(lock_fd,),
            )
        finally:
            os.close(log_fd)
    finally:
        os.close(lock_fd)
    create_time = _create_time(process.pid) or time.time()
    await _wait_agent_exec(process.pid)
    return Launched(process, RunIdentity(process.pid, process.pid, create_time, tag, cgroup))


def disown(process: Process) -> None:
    """Leave a still-running agent alive when the daemon exits without stopping it.

    asyncio SIGKILLs a child whose subprocess transport is closed or garbage-collected while
    it runs (BaseSubprocessTransport.close): a daemon stopped by SIGTERM or `shutdown` killed
    every run's wrapper on its way out, so the next daemon found each run ended, exit unknown,
    and restarted it as a crash. Marked closed, the transport leaves the child alone; our runs
    have no pipes for it to close (stdin is /dev/null, output goes to a file).
    """
    transport = getattr(process, "_transport", None) or getattr(
        getattr(process, "_process", None), "_transport", None
    )
    if transport is not None and hasattr(transport, "_closed"):
        transport._closed = True


def folder_users(folder: Path) -> list[psutil.Process]:
    """Live processes started for the run folder `folder` (they carry it in HERD_RUN_DIR)."""
    return [e.proc for e in proctable.SHARED.table().entries if e.run_dir == str(folder)]


def describe_users(folder: Path) -> str:
    """`pid 123 (sleep), pid 124 (python3)`, or a note that none can be seen, for a message."""
    described = []
    for proc in folder_users(folder)[:5]:
        try:
            described.append(f"pid {proc.pid} ({proc.name()})")
        except psutil.Error:
            continue
    return ", ".join(described) or "no process of it is visible; one holds its alive.lock"


def _check_program(argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> None:
    """Raise the OSError the exec would give, before the wrapper shell hides it."""
    if not argv:
        raise OSError("empty command")
    program = argv[0]
    if "/" in program:
        path = Path(program) if Path(program).is_absolute() else cwd / program
        if not path.exists():
            raise FileNotFoundError(2, "No such file or directory", program)
        if not os.access(path, os.X_OK) or path.is_dir():
            raise PermissionError(13, "Permission denied", program)
        return
    if shutil.which(program, path=env.get("PATH", os.defpath)) is None:
        raise FileNotFoundError(2, "not found on PATH", program)


async def _wait_agent_exec(pid: int) -> None:
    """Return once the wrapper `pid` has exec'd the agent, or ended, or AGENT_EXEC_WAIT_S passed.

    Until the exec a signal lands in the wrapper: its trap swallows a stop signal meant for the
    agent (which then starts anyway), and a SIGSTOP freezes dash's vfork child before its exec,
    so the wrapper can never show as stopped. A run counts as running only after this.
    The quick looks run on the loop (a few /proc reads each): a worker thread per start, each
    polling every few milliseconds, took the GIL from the loop so often that a client's
    request waited hundreds of milliseconds during a fleet's start.
    """
    deadline = time.monotonic() + AGENT_EXEC_WAIT_S
    own = _read_proc(f"/proc/{pid}/cmdline")
    if own is None or _read_proc(f"/proc/{pid}/task/{pid}/children") is None:
        await _wait_agent_exec_by_scan(pid)  # a kernel without the children list
        return
    while time.monotonic() < deadline and not _zombie_or_gone(pid):
        # The wrapper's own list of children: two small reads a poll, where a look at every
        # newer PID's stat file (and a psutil object per child) was a tenth of a fleet's start.
        listed = _read_proc(f"/proc/{pid}/task/{pid}/children") or b""
        for child in listed.split():
            argv = _read_proc(f"/proc/{int(child)}/cmdline")
            if argv and argv != own:  # a vfork child shares the wrapper's until its exec
                return
        await anyio.sleep(AGENT_EXEC_POLL_S)


def _read_proc(path: str) -> bytes | None:
    """A /proc file's bytes, or None when the process (or the file) is gone."""
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError:
        return None


def _zombie_or_gone(pid: int) -> bool:
    """True once `pid` has exited (a zombie until its parent reaps it) or is gone."""
    stat = _read_proc(f"/proc/{pid}/stat")
    return stat is None or stat.rpartition(b")")[2].split()[:1] == [b"Z"]


async def _wait_agent_exec_by_scan(pid: int) -> None:
    """`_wait_agent_exec` where /proc lists no children: a scan of the newer PIDs instead."""
    deadline = time.monotonic() + AGENT_EXEC_WAIT_S
    try:
        wrapper = psutil.Process(pid)
        own = wrapper.cmdline()
        polls = 0
        while time.monotonic() < deadline and wrapper.status() != psutil.STATUS_ZOMBIE:
            polls += 1
            if polls % CHILD_FULL_SCAN_EVERY == 0:
                children = await anyio.to_thread.run_sync(wrapper.children)
            else:
                children = _newer_children(wrapper)
            for child in children:
                with contextlib.suppress(psutil.Error):
                    argv = child.cmdline()  # a vfork child shares the wrapper's until its exec
                    if argv and argv != own:
                        return
            await anyio.sleep(AGENT_EXEC_POLL_S)
    except psutil.Error:
        return  # the wrapper is gone: nothing is left to wait for


def _newer_children(parent: psutil.Process) -> list[psutil.Process]:
    """The children of `parent` among the PIDs above its own.

    A fork takes the next free PID, so a new wrapper's child is nearly always above it; reading
    only those spares the stat file of every process on the machine at each poll (psutil's
    `children()`), which was a tenth of a fleet's cold start. The PIDs wrap around at the
    limit: the full look every few polls finds a child below its parent.
    """
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit() or int(name) <= parent.pid:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat_file:
                fields = stat_file.read().rpartition(b")")[2].split()
        except OSError:
            continue  # gone meanwhile
        if len(fields) > 1 and int(fields[1]) == parent.pid:
            with contextlib.suppress(psutil.Error):
                found.append(psutil.Process(int(name)))
    return found


def _create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def lock_held(folder: Path) -> bool:
    """True while any process of the run still holds its inherited `alive.lock`."""
    try:
        fd = os.open(folder / LOCK_FILE, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def held_run_folders(session_runs: Path) -> list[Path]:
    """The run folders of a session whose `alive.lock` some live process still holds."""
    try:
        folders = sorted(p for p in session_runs.iterdir() if p.name.isdigit())
    except OSError:
        return []
    return [folder for folder in folders if lock_held(folder)]


def leader_alive(identity: RunIdentity) -> bool:
    """True while the run's leader process (checked by start time, not PID alone) lives."""
    if identity.pid is None or identity.create_time is None or identity.pid <= 1:
        return False
    try:
        proc = psutil.Process(identity.pid)
        return (
            abs(proc.create_time() - identity.create_time) < CREATE_TIME_SLACK_S
            and proc.status() != psutil.STATUS_ZOMBIE
        )
    except psutil.Error:
        return False


def run_alive(identity: RunIdentity, folder: Path) -> bool:
    """True while anything of the run lives: its leader, its lock, or its cgroup."""
    return leader_alive(identity) or lock_held(folder) or cgroups.populated(identity.cgroup)


def _refusal(pid: int, pgid: int | None) -> str | None:
    """Why no signal may ever go to this process, or None when it may."""
    if pid <= 1:
        return "PID 1 and below are never signalled"
    if pid == os.getpid():
        return "it is the daemon itself"
    if pgid is not None and pgid <= 1:
        return f"its process group {pgid} is not a run's"
    if pgid is not None and pgid == os.getpgrp():
        return "it is in the daemon's own process group"
    if pid in ancestry.ancestor_pids():
        return "it is an ancestor of the daemon"
    return None


def _confirmed_group(identity: RunIdentity) -> int | None:
    """The run's process group, only while its leader is the very process herd started."""
    pgid, pid, created = identity.pgid, identity.pid, identity.create_time
    if pgid is None or pid is None or created is None:
        return None
    reason = _refusal(pgid, pgid) or (None if pgid == pid else "it is not the leader's")
    if reason is not None:
        log.warning("refused process group %s of run %s: %s", pgid, identity.tag, reason)
        return None
    try:
        # A zombie leader still holds its PID, so its group cannot be anyone else's yet.
        if abs(psutil.Process(pgid).create_time() - created) < CREATE_TIME_SLACK_S:
            return pgid
    except psutil.Error:
        pass
    return None  # leader gone or recycled: only the tag and the cgroup prove membership now


Known = dict[tuple[int, float], psutil.Process]
"""Processes proven to be a run's during one stop, by (pid, start time): they stay proven."""


def run_processes(
    identity: RunIdentity, known: Known | None = None, not_before: float | None = None
) -> list[psutil.Process]:
    """Every live process the run provably owns: its cgroup, its confirmed group, its env tag.

    The process table is a shared scan begun no earlier than `not_before` (default: now), so
    runs stopping together share one scan per poll.
    """
    found: list[psutil.Process] = []
    in_cgroup = cgroups.members(identity.cgroup)
    group = _confirmed_group(identity)
    table = proctable.SHARED.table(not_before)
    candidates: dict[int, proctable.Entry] = {}
    for entry in table.by_tag.get(identity.tag, []) if identity.tag else []:
        candidates[entry.pid] = entry
    if group is not None:
        for entry in table.by_pgid.get(group, []):
            if _in_group(entry, identity):
                candidates[entry.pid] = entry
    for pid in in_cgroup:
        member = table.by_pid.get(pid)
        if member is not None:
            candidates[pid] = member
    if known is not None:
        for entry in table.entries:
            if (entry.pid, entry.create_time) in known:
                candidates[entry.pid] = entry
    for entry in candidates.values():
        key = (entry.pid, entry.create_time)
        if known is not None and key in known:
            found.append(known[key])
            continue
        found.append(entry.proc)
        if known is not None:
            known[key] = entry.proc
    return found


def _in_group(entry: proctable.Entry, identity: RunIdentity) -> bool:
    """A member of the run's confirmed group, started no earlier than the run itself."""
    if identity.create_time is None:
        return False
    return entry.create_time >= identity.create_time - CREATE_TIME_SLACK_S


def find_leader(tag: str) -> RunIdentity | None:
    """The wrapper (group leader) of the run carrying `tag`, if any process of it lives."""
    for entry in proctable.SHARED.table().by_tag.get(tag, []) if tag else []:
        if entry.pid > 1 and entry.pgid == entry.pid:
            return RunIdentity(entry.pid, entry.pid, entry.create_time, tag)
    return None


def send_checked(proc: psutil.Process, signum: int) -> bool:
    """Send one signal, unless the target is PID <= 1, the daemon, its group or its ancestor.

    Every signal herd sends to an agent goes through here, so no caller can get it wrong;
    a refusal is logged. psutil refuses a PID reused since `proc` was found.
    """
    try:
        pgid: int | None = os.getpgid(proc.pid)
    except OSError:
        return False
    reason = _refusal(proc.pid, pgid)
    if reason is not None:
        log.warning("refused to send %s to pid %d: %s", signal_name(signum), proc.pid, reason)
        return False
    try:
        proc.send_signal(signum)
    except psutil.Error:
        return False
    return True


def signal_run(
    identity: RunIdentity,
    signum: int,
    known: Known | None = None,
    group_done: int | None = None,
    not_before: float | None = None,
) -> int:
    """Send `signum` to every process of the run (each re-checked by psutil); returns how many.

    Processes still in `group_done`, a group `signal_group` signalled as a whole, are skipped:
    a second SIGINT or SIGTERM makes some agents quit at once instead of cleanly. The process
    scan began no earlier than `not_before` (default: now).
    """
    return sum(
        send_checked(proc, signum)
        for proc in run_processes(identity, known, not_before)
        if group_done is None or not _in_pgid(proc.pid, group_done)
    )


def signal_group(identity: RunIdentity, signum: int) -> int | None:
    """Send `signum` to the run's process group at once, without a process scan, while its
    leader is the very process herd started; return the group, or None if none was signalled.

    A fleet's `herd down` signalled each run only after a scan of every process on the
    machine, which 200 stops took seconds to share; the scan still follows, for what escaped.
    """
    group = _confirmed_group(identity)
    if group is None:
        return None
    try:
        os.killpg(group, signum)
    except OSError:
        return None
    return group


def signal_cgroup(identity: RunIdentity, signum: int, group_done: int | None) -> bool:
    """Send `signum` to the members of the run's cgroup outside `group_done`; False (nothing
    sent) when the run has no cgroup herd made, so the caller scans every process instead.

    Every process of the run is in its cgroup (the wrapper moved in before starting the
    agent), so what left the group is found in `cgroup.procs`, not by reading the environment
    of every process on the machine: that scan was most of a fleet's `herd down`. An empty
    cgroup means the whole run has ended already (the checks that it is gone read the
    cgroup too: gonecheck).
    """
    if not cgroups.is_run_cgroup(identity.cgroup):
        return False
    for pid in cgroups.members(identity.cgroup):  # none: every process of the run has ended
        if group_done is not None and _in_pgid(pid, group_done):
            continue
        try:
            send_checked(psutil.Process(pid), signum)
        except psutil.Error:
            continue  # gone meanwhile
    return True


def _in_pgid(pid: int, pgid: int) -> bool:
    try:
        return os.getpgid(pid) == pgid
    except OSError:
        return False


def pause_run(identity: RunIdentity, timeout_s: float, poll_s: float) -> bool:
    """SIGSTOP the run until every process of it shows as stopped; False if one never did.

    A process forked after a pass, or busy in the kernel, is stopped again at the next pass.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        running = [proc for proc in run_processes(identity) if not _stopped(proc)]
        if not running:
            return True
        if time.monotonic() >= deadline:
            return False
        for proc in running:
            send_checked(proc, signal.SIGSTOP)
        time.sleep(poll_s)


def _stopped(proc: psutil.Process) -> bool:
    """Stopped by a signal, or already ended: nothing of it runs."""
    try:
        return proc.status() in {
            psutil.STATUS_STOPPED,
            psutil.STATUS_TRACING_STOP,
            psutil.STATUS_ZOMBIE,
        }
    except psutil.Error:
        return True


def _kill_run(identity: RunIdentity, known: Known) -> int:
    """SIGKILL the whole run: its cgroup at once (any namespace), then each process found."""
    cgroups.kill(identity.cgroup)
    return signal_run(identity, signal.SIGKILL, known)


def _run_gone(identity: RunIdentity, known: Known, not_before: float) -> bool:
    """Nothing of the run left: its cgroup empty and its leader gone where it has a cgroup
    (gonecheck), else nothing in a process scan begun after `not_before`."""
    by_cgroup = gonecheck.gone_by_cgroup(identity, leader_alive(identity), known)
    if by_cgroup is not None:
        return by_cgroup
    gone = not run_processes(identity, known, not_before)
    return gone and not cgroups.populated(identity.cgroup)


async def stop_tree(
    identity: RunIdentity,
    stop_signal: int,
    grace_s: float,
    kill_wait_s: float,
    poll_s: float,
    continue_first: bool = False,
    leader_exited: anyio.Event | None = None,
) -> bool:
    """Signal the run, wait `grace_s`, SIGKILL what is left, wait `kill_wait_s`.

    Returns True when nothing of the run is left; False means it could not be killed.
    A process proven to be the run's stays so for the whole stop, even once its leader is gone.
    `leader_exited`, set once the leader (the daemon's own child, reaped by the child watcher)
    has exited: until then the run is not gone, and the grace is waited without process scans.
    """
    known: Known = {}
    asked = time.monotonic()
    if stop_signal != signal.SIGKILL:
        group = signal_group(identity, stop_signal)  # a few /proc reads: fine on the loop
        if not await anyio.to_thread.run_sync(signal_cgroup, identity, stop_signal, group):
            # Any scan begun since the stop was asked for finds what escaped the group: runs
            # stopping together share it, instead of each waiting for a scan begun after its turn.
            await anyio.to_thread.run_sync(signal_run, identity, stop_signal, known, group, asked)
        if continue_first:
            await anyio.to_thread.run_sync(signal_run, identity, signal.SIGCONT, known)
        signalled = time.monotonic()
        if leader_exited is not None:
            # A live leader is a process of the run: polling scans (every process's
            # environment, shared by the runs stopping together) cannot find the run gone
            # before it exits, and 200 stops' polls were most of `herd down`'s time.
            with anyio.move_on_after(grace_s):
                await leader_exited.wait()
        grace_left_s = max(0.0, signalled + grace_s - time.monotonic())
        if await _wait_empty(identity, known, grace_left_s, poll_s):
            return True
    return await _wait_empty(identity, known, kill_wait_s, poll_s, kill=True)


async def _wait_empty(
    identity: RunIdentity, known: Known, timeout_s: float, poll_s: float, kill: bool = False
) -> bool:
    """Wait until nothing of the run is left, killing again what a fork left behind."""
    deadline = time.monotonic() + timeout_s
    while True:
        poll_began = time.monotonic()  # a scan from before the signals cannot tell "gone"
        if kill:
            await anyio.to_thread.run_sync(_kill_run, identity, known)
        if await anyio.to_thread.run_sync(_run_gone, identity, known, poll_began):
            return True
        if time.monotonic() >= deadline:
            return False
        await anyio.sleep(poll_s)
