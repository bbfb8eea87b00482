"""PID 1 of a test's private PID namespace: runs one test, reports every signal and leftover.

Usage (inside `unshare --pid --fork --mount-proc`, so that this program is PID 1):

    python pidns_sentinel.py REPORT.json DEADLINE_S -- ARGV...

It blocks every catchable signal and collects them with `sigtimedwait`, which names the
sender. PID 1 of a namespace never gets SIGKILL or SIGSTOP from inside it, so a bystander
child in this program's own process group stands in for "every other process": it records
what it receives, and its death (a SIGKILL) is seen here by `waitpid`. ARGV (the inner
pytest) runs with an empty signal mask. As init, this program reaps every orphan. When ARGV
ends it lists what still runs, kills it, and writes REPORT.json. Stdlib only.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
from pathlib import Path
from typing import Any

UNCATCHABLE = {signal.SIGKILL, signal.SIGSTOP}
CATCHABLE = sorted(set(signal.valid_signals()) - UNCATCHABLE)
USER_SENT_CODES = {0, -1, -6}
"""si_code of a signal sent by a process (SI_USER, SI_QUEUE, SI_TKILL), not by the kernel."""

POLL_S = 0.05
"""How often the sentinel wakes to reap children when no signal arrives."""

SETTLE_S = 0.5
"""Processes still exiting when the inner run ends get this long before they count as left."""

OUTPUT_LIMIT_CHARS = 60_000
"""The report keeps the tail of the inner run's output; pytest's summary is at the end."""

BYSTANDER_PID_VAR = "HERD_PIDNS_BYSTANDER_PID"


def install_and_block() -> list[int]:
    """Catch every catchable signal (SIG_DFL signals are dropped by a namespace's init)."""
    handled = []
    for signum in CATCHABLE:
        try:
            signal.signal(signum, lambda *_: None)
            handled.append(signum)
        except (OSError, ValueError):  # glibc reserves two real-time signals
            continue
    signal.pthread_sigmask(signal.SIG_BLOCK, CATCHABLE)
    return handled


def describe_sender(pid: int) -> str:
    """The sender's command line, while it still exists (0: from outside the namespace)."""
    if pid == 0:
        return "(outside the namespace or the kernel)"
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "(gone)"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:300]


def signal_record(info: Any) -> dict[str, Any]:
    return {
        "signal": signal.Signals(info.si_signo).name,
        "from_pid": info.si_pid,
        "from_cmdline": describe_sender(info.si_pid),
        "si_code": info.si_code,
    }


def spawn(argv: list[str], handled: list[int], out_path: str | None, stdin_fd: int | None) -> int:
    """Start `argv` with no blocked signal and default handlers, in this process group."""
    actions: list[tuple[Any, ...]] = []
    if stdin_fd is not None:
        actions.append((os.POSIX_SPAWN_DUP2, stdin_fd, 0))
    else:
        actions.append((os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0))
    if out_path is not None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        actions.append((os.POSIX_SPAWN_OPEN, 1, out_path, flags, 0o644))
        actions.append((os.POSIX_SPAWN_DUP2, 1, 2))
    return os.posix_spawn(
        argv[0], argv, os.environ, file_actions=actions, setsigmask=(), setsigdef=handled
    )


def living_pids(exclude: set[int]) -> list[int]:
    """Processes of this namespace that are not zombies, other than `exclude`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in exclude:
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if stat.rpartition(")")[2].split()[0] != "Z":
            found.append(int(entry.name))
    return found


class Sentinel:
    """The namespace's init: collects signals, reaps, watches the bystander and the inner run."""

    def __init__(self, report_path: Path, deadline_s: float, argv: list[str]) -> None:
        self.report_path = report_path
        self.deadline = time.monotonic() + deadline_s
        self.argv = argv
        self.handled = install_and_block()
        self.signals: list[dict[str, Any]] = []
        self.bystander_end: str | None = None
        self.inner_exit: int | None = None
        self.notes: list[str] = []
        self.bystander_pid = -1
        self.inner_pid = -1

    def collect(self, timeout_s: float) -> None:
        """Wait up to `timeout_s` for one signal; then reap every child that ended."""
        info = signal.sigtimedwait(CATCHABLE, timeout_s)
        if info is not None and (
            info.si_signo != signal.SIGCHLD or info.si_code in USER_SENT_CODES
        ):
            self.signals.append(signal_record(info))
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG | os.WUNTRACED)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.child_changed(pid, status)

    def child_changed(self, pid: int, status: int) -> None:
        if pid == self.bystander_pid:
            if os.WIFSTOPPED(status):
                self.bystander_end = f"stopped by {signal.Signals(os.WSTOPSIG(status)).name}"
                os.kill(pid, signal.SIGCONT)
            elif os.WIFSIGNALED(status):
                self.bystander_end = f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
            else:
                self.bystander_end = f"exited {os.WEXITSTATUS(status)}"
        elif pid == self.inner_pid and not os.WIFSTOPPED(status):
            self.inner_exit = os.waitstatus_to_exitcode(status)

    def run(self) -> None:
        record_path = self.report_path.with_suffix(".bystander")
        read_end, self.bystander_stdin = os.pipe()
        me = [sys.executable, os.path.abspath(__file__), "--bystander", str(record_path)]
        self.bystander_pid = spawn(me, self.handled, None, read_end)
        os.close(read_end)
        os.environ[BYSTANDER_PID_VAR] = str(self.bystander_pid)
        self.wait_for_file(record_path)
        output_path = str(self.report_path.with_suffix(".out"))
        self.inner_pid = spawn(self.argv, self.handled, output_path, None)
        while self.inner_exit is None:
            if time.monotonic() > self.deadline:
                self.notes.append("the inner run passed its deadline and was killed")
                os.kill(self.inner_pid, signal.SIGKILL)
                self.deadline = float("inf")
            self.collect(POLL_S)
        bystander_alive = self.bystander_end is None
        leftovers = self.sweep()
        os.close(self.bystander_stdin)  # EOF: the bystander exits on its own
        bystander_limit = time.monotonic() + 5.0
        while self.bystander_end is None and time.monotonic() < bystander_limit:
            self.collect(POLL_S)
        self.collect(0)
        output = Path(output_path).read_text(errors="replace")
        report = {
            "inner_exit": self.inner_exit,
            "inner_output": output[-OUTPUT_LIMIT_CHARS:],
            "sentinel_signals": self.signals,
            "bystander_signals": read_records(record_path),
            "bystander_alive": bystander_alive,
            "bystander_end": self.bystander_end,
            "leftovers": leftovers,
            "notes": self.notes,
        }
        tmp = self.report_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(report, indent=1))
        tmp.replace(self.report_path)

    def wait_for_file(self, path: Path) -> None:
        """The bystander creates its record file once its handlers are in place."""
        limit = time.monotonic() + 10.0
        while not path.exists() and time.monotonic() < limit:
            self.collect(0.01)

    def sweep(self) -> list[dict[str, Any]]:
        """What still runs besides init and the bystander: describe it, then SIGKILL it."""
        exclude = {1, self.bystander_pid}
        settle_until = time.monotonic() + SETTLE_S
        while living_pids(exclude) and time.monotonic() < settle_until:
            self.collect(POLL_S)
        left = [{"pid": pid, "cmdline": describe_sender(pid)} for pid in living_pids(exclude)]
        kill_until = time.monotonic() + 5.0
        while (pids := living_pids(exclude)) and time.monotonic() < kill_until:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.collect(POLL_S)
        return left


def read_records(path: Path) -> list[dict[str, Any]]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except OSError:
        return []


def bystander(record_path: Path) -> None:
    """Record every signal received until stdin closes; SIGKILL/SIGSTOP show in waitpid."""
    install_and_block()
    with open(record_path, "a") as records:
        while True:
            info = signal.sigtimedwait(CATCHABLE, POLL_S)  # also how soon it sees EOF and exits
            if info is not None:
                records.write(json.dumps(signal_record(info)) + "\n")
                records.flush()
            ready, _, _ = select.select([0], [], [], 0)
            if ready and os.read(0, 1) == b"":
                return


def main(args: list[str]) -> int:
    if args[:1] == ["--bystander"]:
        bystander(Path(args[1]))
        return 0
    if len(args) < 4 or args[2] != "--" or os.getpid() != 1:
        print(__doc__, file=sys.stderr)
        return 2
    Sentinel(Path(args[0]), float(args[1]), args[3:]).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
