"""Where herd keeps things: the state folder beside herd.toml and the private socket folder."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

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
    digest = hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:16]
    return runtime_dir() / f"{digest}.sock"


def prepare_state_dir(state_dir: Path) -> None:
    """Create `.herd/` with a `.gitignore` of `*`, so an agent's `git add -A` never commits it."""
    state_dir.mkdir(parents=True, exist_ok=True)
    ignore = state_dir / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n")
    (state_dir / "runs").mkdir(exist_ok=True)


def run_dir(state_dir: Path, session: str, run: int) -> Path:
    """The folder of one run: its output.log, exit status and liveness lock."""
    return state_dir / "runs" / session / str(run)
