"""Where herd keeps things: the state folder beside herd.toml and the private socket folder."""

from __future__ import annotations

import os
from pathlib import Path

from agentherd.supervisor.files import private

OUTPUT_FILE = "output.log"
"""A run's output (stdout and stderr as the agent wrote them), in its run folder."""

MAX_SOCKET_PATH_BYTES = 107
"""A Unix socket path longer than this cannot bind on Linux (sun_path is 108 bytes with NUL)."""


def runtime_dir() -> Path:
    """A private (0700) folder for sockets: $XDG_RUNTIME_DIR/herd, else /tmp/herd-<uid>."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    folder = (
        Path(base) / "herd" if base and Path(base).is_dir() else Path(f"/tmp/herd-{os.getuid()}")
    )
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.stat()
    if info.st_uid != os.getuid():
        raise PermissionError(
            f"{folder} belongs to another user; set XDG_RUNTIME_DIR to a private folder"
        )
    if info.st_mode & 0o077:
        folder.chmod(0o700)
    return folder


def socket_path_for(state_dir: Path) -> Path:
    """The control socket of the daemon owning `state_dir`, named by a hash of that folder."""
    import hashlib  # here: a cold `herd up` (tui/cli/fastup.py) imports this module to spawn

    digest = hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:16]
    return runtime_dir() / f"{digest}.sock"


STATE_FILES = ("state.db", "state.db-wal", "state.db-shm", "daemon.log", "daemon.lock")
"""The state folder's own files, made private at each start where an older herd left them
readable (the folder itself, made 0700 first, already keeps others out of everything in it)."""


def prepare_state_dir(state_dir: Path) -> None:
    """Create `.herd/` (0700) with a `.gitignore` of `*`, so an agent's `git add -A` never
    commits it; raise StateDirUnwritable, one line for a person, when herd cannot write it."""
    try:
        private.make_folder(state_dir)
        ignore = state_dir / ".gitignore"
        if not ignore.exists():
            private.write_file(ignore, "*\n")
        private.make_folder(state_dir / "runs")
        for name in STATE_FILES:
            private.tighten_file(state_dir / name)
    except OSError as exc:
        raise private.StateDirUnwritable(state_dir, exc) from None


def open_daemon_log(state_dir: Path) -> int:
    """An append fd on `.herd/daemon.log` (0600), for a daemon's output."""
    try:
        return private.open_file(state_dir / "daemon.log", os.O_WRONLY | os.O_APPEND)
    except OSError as exc:
        raise private.StateDirUnwritable(state_dir, exc) from None


def run_dir(state_dir: Path, session: str, run: int) -> Path:
    """The folder of one run: its output.log, exit status and liveness lock."""
    return state_dir / "runs" / session / str(run)
