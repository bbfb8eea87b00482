"""`python -m agentherd.supervisor.main CONFIG`: the daemon entry point that `herd up` spawns."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path

from agentherd.sessions.config import ConfigError, environment_problems, load_config
from agentherd.supervisor.daemon import DaemonAlreadyRunning, run_foreground
from agentherd.supervisor.files.paths import open_daemon_log, prepare_state_dir
from agentherd.supervisor.files.private import StateDirUnwritable

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(state_dir: Path, to_stderr: bool) -> None:
    """Log to `.herd/daemon.log` (and stderr when in the foreground)."""
    prepare_state_dir(state_dir)
    os.close(open_daemon_log(state_dir))  # made 0600 first: FileHandler would follow the umask
    handlers: list[logging.Handler] = [logging.FileHandler(state_dir / "daemon.log")]
    if to_stderr:
        handlers.append(logging.StreamHandler(sys.stderr))
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, handlers=handlers, force=True)


UP_CHECKED_FLAG = "--up-checked"
"""Spawned by the fast `herd up` (tui/cli/fastup.py): serve only if `herd up` has nothing to say
about herd.toml, else exit 2 and let the full command line say it."""


def main(argv: list[str] | None = None) -> int:
    """Load the config, take the lock, serve; exit 2 on a person's error."""
    args = sys.argv[1:] if argv is None else argv
    checked = args[:1] == [UP_CHECKED_FLAG]
    args = args[1:] if checked else args
    if len(args) != 1:
        print("usage: python -m agentherd.supervisor.main PATH/TO/herd.toml", file=sys.stderr)
        return 2
    try:
        config = load_config(Path(args[0]))
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    if checked and (config.cluster is not None or environment_problems(config)):
        print(f"{config.path}: left to the full `herd up` to report; not started", file=sys.stderr)
        return 2
    try:
        configure_logging(config.state_dir, to_stderr=False)
    except StateDirUnwritable as exc:
        print(f"herd: {exc}", file=sys.stderr)
        return 2
    try:
        run_foreground(config)
    except DaemonAlreadyRunning as exc:
        logging.getLogger("herd.daemon").info("%s; this one exits", exc)
        return 0
    return 0


def exit_now(code: int) -> None:
    """Exit without the interpreter's teardown, once everything is on disk.

    By the time `main` returns the store is closed, every report written, the socket and the
    lock released: freeing a fleet's objects one by one only held back `herd down`, which
    waits for this process to end (tenths of a second on a loaded machine).
    """
    logging.shutdown()  # the log's last lines
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):  # closed or absent
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
