"""Pushes each checkpoint and rescue ref to `[cluster] checkpoint_remote` as the daemon makes it.

It follows this host's daemon's event log (as `herd events -f` does), so the daemon and its
runs never wait for the network: one thread reads events, another pushes. Pushes of the same
ref collapse to the newest (a push of the last checkpoint carries every commit before it). A
failed push is a warning in the host's log and changes nothing else; the next checkpoint's
push carries the commits the failed one missed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentherd.supervisor.cluster import worksync
from agentherd.supervisor.git.gitproc import GitError

log = logging.getLogger(__name__)
RETRY_S = 5.0
"""After the daemon's event stream broke (a daemon restart), look again this often."""


@dataclass(frozen=True)
class Push:
    """One ref to push: commit `sha` of the worktree `cwd` to `dest`; `moves`: last/verified."""

    session: str
    cwd: Path
    sha: str
    dest: str
    moves: bool


class CheckpointPusher:
    """Follows the daemon's events and pushes what they name, one push at a time."""

    def __init__(
        self,
        remote: str,
        host: str,
        cwd_of: Callable[[str], Path | None],
        events: Callable[[int], Any],
        history: Callable[[int], list[dict[str, Any]]],
        may_push: Callable[[str], bool] | None = None,
    ) -> None:
        self.remote = remote
        self.host = host
        self.cwd_of = cwd_of
        self.events = events
        """`events(since)`: the daemon's event stream after `since`, live (blocks)."""
        self.history = history
        """`history(since)`: a page of the event log after `since` (empty at its end)."""
        self.may_push = may_push
        """`may_push(session)`: this host still holds the session's token (asked right before
        each push; None: always)."""
        self.refused = 0
        """Pushes not made: the session's token had gone to another attempt."""
        self.seen: dict[str, str] = {}
        """What this host last saw at each moving remote ref (the lease of its next push)."""
        self.pushed = 0
        self.failed = 0
        self._pending: dict[str, Push] = {}
        self._wake = threading.Condition()
        self._stop = threading.Event()
        self._caught_up = threading.Event()
        self._since = 0

    def start(self) -> None:
        """Follow and push in two background threads until `stop`."""
        for target, name in ((self._follow, "herd-push-follow"), (self._drain, "herd-push")):
            threading.Thread(target=target, name=name, daemon=True).start()

    def stop(self) -> None:
        """Stop pushing (a push under way finishes or times out on its own)."""
        self._stop.set()
        with self._wake:
            self._wake.notify_all()

    def saw(self, dest: str, sha: str) -> None:
        """The remote holds `sha` at `dest` (a fetch said so): the next push's lease."""
        with self._wake:
            self.seen[dest] = sha

    def idle(self) -> bool:
        """Nothing waits to be pushed."""
        with self._wake:
            return not self._pending

    # ----- events to pushes ----------------------------------------------------------------

    def take(self, event: dict[str, Any]) -> None:
        """Queue the pushes one event of the daemon asks for."""
        session, kind, data = event.get("session"), event.get("kind"), event.get("data") or {}
        if not session:
            return
        cwd = self.cwd_of(session)
        if cwd is None:
            return
        found: list[Push] = []
        if kind in ("checkpoint", "worktree-reset") and data.get("sha"):
            found.append(
                Push(session, cwd, data["sha"], worksync.session_ref(session, "last"), True)
            )
        if kind == "verify-passed" and data.get("sha"):
            found.append(
                Push(session, cwd, data["sha"], worksync.session_ref(session, "verified"), True)
            )
        for ref_key, sha_key in (("ref", "sha"), ("kept_ref", "kept_sha")):
            if kind in ("rescue-saved", "worktree-reset") and data.get(ref_key):
                ref = worksync.host_ref(session, self.host, data[ref_key])
                found.append(Push(session, cwd, data[sha_key], ref, False))
        if found:
            with self._wake:
                for item in found:
                    self._pending[item.dest] = item
                self._wake.notify_all()

    def _catch_up(self) -> None:
        """Read the log as it stands first, so each ref's pushes collapse to its newest."""
        while page := self.history(self._since):
            for event in page:
                self._since = max(self._since, int(event.get("seq") or 0))
                self.take(event)

    def _follow(self) -> None:
        while not self._stop.is_set():
            try:
                if not self._caught_up.is_set():
                    self._catch_up()
                    self._caught_up.set()
                for event in self.events(self._since):
                    self._since = max(self._since, int(event.get("seq") or 0))
                    self.take(event)
                    if self._stop.is_set():
                        return
            except Exception as exc:  # the daemon restarted or is going: follow it again
                log.info("checkpoint push: event stream ended (%s); following again", exc)
            self._stop.wait(RETRY_S)

    def _drain(self) -> None:
        while True:
            with self._wake:
                while not (self._pending and self._caught_up.is_set()) and not self._stop.is_set():
                    self._wake.wait(1.0)
                if self._stop.is_set():
                    return
                dest, item = next(iter(self._pending.items()))
                lease = self.seen.get(dest) if item.moves else None
            try:
                if self.may_push is not None and not self.may_push(item.session):
                    self.refused += 1
                    log.warning(
                        "checkpoint push refused: %s is no longer this host's (its token "
                        "moved on); %s not pushed",
                        item.session,
                        item.dest,
                    )
                else:
                    if lease != item.sha:
                        worksync.push(
                            item.cwd, self.remote, item.sha, dest, lease, worksync.PUSH_TIMEOUT_S
                        )
                    self.pushed += 1
                    with self._wake:
                        if item.moves:
                            self.seen[dest] = item.sha
            except (GitError, OSError, ValueError) as exc:
                self.failed += 1
                log.warning("checkpoint push failed (the run goes on): %s", exc)
            with self._wake:
                if self._pending.get(dest) == item:
                    del self._pending[dest]
