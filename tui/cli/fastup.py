"""`herd up --no-tui` with no daemon running, without importing click or pydantic.

The full command line spent ~0.7 s of CPU on imports and on reading herd.toml twice before
the daemon began to boot: seconds of wall time on a loaded machine, all of it before the
first agent started. Here the daemon is spawned at once and checks herd.toml itself, as the
full command line would (supervisor/main.py `--up-checked`); whatever it finds (a bad file,
a missing program, a shared worktree, a cluster) makes it exit without serving, and `up` goes
to the full command line, which words it exactly as before.
"""

from __future__ import annotations

import os
import sys
import time

from agentherd.tui.cli import fastcall

UP_CHECKED_FLAG = "--up-checked"
"""supervisor/main.py: refuse to serve when `herd up` would say anything about herd.toml."""

DAEMON_START_TIMEOUT_S = 15.0
"""launcher.DAEMON_START_TIMEOUT_S: a daemon silent this long has failed (its log says why)."""

DAEMON_POLL_S = 0.005
"""How often a cold `herd up` looks for its daemon's answer: a look that finds no socket yet is
a failed connect (microseconds), and the answer is seen half a period after it comes, on
average, before the fleet's start is asked for."""

ACTIVE = frozenset(
    {
        "queued",
        "starting",
        "running",
        "paused",
        "waiting-approval",
        "waiting-input",
        "verifying",
        "backoff",
        "stopping",
    }
)
"""sessions.states.ACTIVE_STATES as strings (tests/test_fastup.py checks they agree)."""


def up_config(argv: list[str]) -> tuple[str | None] | None:
    """(the -c/--config value,) when argv is `up --no-tui` with no names; else None."""
    if argv[:1] in (["-c"], ["--config"]) and len(argv) >= 2:
        config: str | None = argv[1]
        rest = argv[2:]
    elif argv[:1] and argv[0].startswith("--config="):
        config, rest = argv[0].split("=", 1)[1], argv[1:]
    else:
        config, rest = None, argv
    return (config,) if rest == ["up", "--no-tui"] else None


def _answers(socket_path: str) -> bool:
    """True when a daemon of this herd's version answers on the socket, or one is there but
    busy (spawning another would only find its lock taken)."""
    try:
        fastcall.call(socket_path, "info", socket_timeout_s=2.0)
    except fastcall.DaemonBusy:
        return True
    except (OSError, ValueError, LookupError):
        return False
    return True


def _spawn_daemon(config_path: str) -> int | None:
    """Start the daemon as launcher.ensure_daemon does (its own session, output to its log),
    told to check herd.toml first; return its pid (None: the state folder is not writable)."""
    import subprocess  # only here: the other fast verbs start no process
    from pathlib import Path

    from agentherd.supervisor.files import paths, private

    state_dir = Path(config_path).parent / fastcall.STATE_DIR_NAME
    try:
        paths.prepare_state_dir(state_dir)  # 0700, with its .gitignore
        log_fd = paths.open_daemon_log(state_dir)
    except private.StateDirUnwritable:
        return None  # the full command line says so, in one line
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "agentherd.supervisor.main", UP_CHECKED_FLAG, config_path],
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=log_fd,
            start_new_session=True,
            cwd=os.path.dirname(config_path),
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    finally:
        os.close(log_fd)
    # Not a child to wait for: _wait_serving reaps it only if it fails to start, and a serving
    # daemon outlives this process (marked done, Popen neither warns nor keeps it).
    process.returncode = 0
    return process.pid


def _exited(pid: int) -> bool:
    """True once our daemon child has exited (reaped here): it refused herd.toml, failed, or
    found another daemon holding the state folder's lock (one of another version, say)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == pid


def _wait_serving(socket_path: str, pid: int) -> bool:
    """Wait until our daemon answers; False once it has exited without answering."""
    deadline = time.monotonic() + DAEMON_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if _answers(socket_path):
            return True
        if _exited(pid):
            return False  # the full command line words it (or finds the daemon that won)
        time.sleep(DAEMON_POLL_S)
    return False


def _queued(item: dict[str, object]) -> str:
    """What the full command line adds after a handle: `  queued (after:NAME)`."""
    reason = item.get("reason")
    return f"  {item.get('state')} ({reason})" if reason else ""


def fast_up(argv: list[str]) -> bool:
    """Start the daemon and the fleet as `herd up --no-tui` does and print what it prints;
    False to use the full command line (a daemon already runs, or herd.toml needs words)."""
    split = up_config(argv)
    path = fastcall.config_path(split[0]) if split is not None else None
    socket_path = fastcall.socket_path_of(path) if path is not None else None
    if path is None or socket_path is None or fastcall.installed_version() is None:
        return False
    if _answers(socket_path):
        return False  # a running daemon reads herd.toml again first: the full command line's
    pid = _spawn_daemon(path)
    if pid is None or not _wait_serving(socket_path, pid):
        return False
    try:
        # No socket timeout: `up` first finishes the stops of a `herd down` that was cut short.
        started = fastcall.call(socket_path, "up", socket_timeout_s=None, names=None)
        statuses = fastcall.call(socket_path, "ls")
    except (OSError, ValueError, LookupError):
        return False  # the full command line, finding the daemon, asks again and words it
    active = sum(1 for status in statuses if status.get("state") in ACTIVE)
    out = [f"herd: started the daemon; {active} of {len(statuses)} session(s) active"]
    out += [f"  {item.get('handle')}{_queued(item)}" for item in started]
    sys.stdout.write("\n".join(out) + "\n")
    return True
