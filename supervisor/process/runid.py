"""Who a run is (enough to find its processes again) and how its leader ended."""

from __future__ import annotations

import signal
from dataclasses import dataclass

TAG_VAR = "HERD_RUN_TAG"
"""Every process of a run carries its tag in this environment variable."""


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
