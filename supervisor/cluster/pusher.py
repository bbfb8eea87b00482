"""Pushes each checkpoint and rescue ref to `[cluster] checkpoint_remote` as the daemon makes it.

It follows this host's daemon's event log (as `herd events -f` does), so the daemon and its
runs never wait for the network: one thread reads events, another pushes. Pushes of the same
ref collapse to the newest (a push of the last checkpoint carries every commit before it). A
failed push is a warning in the host's log and changes nothing else: it is tried again later
(the last checkpoint of a run has no next one to carry it), unless a newer one replaced it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentherd.supervisor.cluster import worksync
from agentherd.supervisor.git.gitproc import GitError

log = logging.getLogger(__name__)
RETRY_S = 5.0
"""After the daemon's event stream broke (a daemon restart), look again this often; and the
first wait before a failed push is tried again (doubled at each failure, up to RETRY_MAX_S)."""
RETRY_MAX_S = 300.0
GIVE_UP_AFTER = 6
"""Failed tries of one push (about 2.5 minutes of them) before it is left to the next
checkpoint (a push git keeps refusing: an old checkpoint replayed after a daemon restart)."""


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
        retry_s: float = RETRY_S,
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
        each push; None: always). It raises when it cannot tell (the database is away)."""
        self.retry_s = retry_s
        self.refused = 0
        """Pushes not made: the session's token had gone to another attempt."""
        self.seen: dict[str, str] = {}
        """What this host last saw at each moving remote ref (the lease of its next push)."""
        self.pushed = 0
        self.failed = 0
        self.displaced = 0
        """Late pushes of a host that had lost the session, pushed over (and kept)."""
        self._pending: dict[str, Push] = {}
        self._retry: dict[str, tuple[float, int]] = {}
        """dest -> (when its push may be tried again, monotonic; failed tries so far)."""
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
                    if self._pending.get(item.dest) != item:
                        self._retry.pop(item.dest, None)  # a newer push is tried at once
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

    def _next_due(self) -> Push | None:
        """The first pending push not waiting to be tried again (call with `_wake` held)."""
        if not self._caught_up.is_set():
            return None
        now = time.monotonic()
        for dest, item in self._pending.items():
            if self._retry.get(dest, (0.0, 0))[0] <= now:
                return item
        return None

    def _wait_s(self) -> float:
        """How long nothing is due (at most a second; call with `_wake` held)."""
        due = [at - time.monotonic() for at, _ in self._retry.values()]
        return max(0.01, min([1.0, *due]))

    def _drain(self) -> None:
        while True:
            with self._wake:
                while (item := self._next_due()) is None and not self._stop.is_set():
                    self._wake.wait(self._wait_s())
                if self._stop.is_set() or item is None:
                    return
                lease = self.seen.get(item.dest) if item.moves else None
            done = self._push(item, lease)
            with self._wake:
                if self._pending.get(item.dest) == item:  # else a newer push replaced it
                    self._settle(item, done)

    def _settle(self, item: Push, done: bool) -> None:
        """After a try of `item`: forget it, or put it off (call with `_wake` held)."""
        if not done and self._try_again(item) < GIVE_UP_AFTER:
            return
        if not done:
            log.warning("checkpoint push of %s given up: the next one carries it", item.dest)
        del self._pending[item.dest]
        self._retry.pop(item.dest, None)

    def _try_again(self, item: Push) -> int:
        """Put `item` off (call with `_wake` held); its failed tries so far."""
        tries = self._retry.get(item.dest, (0.0, 0))[1] + 1
        wait_s = min(self.retry_s * 2 ** (tries - 1), RETRY_MAX_S)
        self._retry[item.dest] = (time.monotonic() + wait_s, tries)
        return tries

    def _push(self, item: Push, lease: str | None) -> bool:
        """One try: True when done (pushed, or refused for good), False to try again (the push
        failed, or nobody could say whether this host may still push)."""
        try:
            if self.may_push is not None and not self.may_push(item.session):
                self.refused += 1
                log.warning(
                    "checkpoint push refused: %s is no longer this host's (its token moved on); "
                    "%s not pushed",
                    item.session,
                    item.dest,
                )
                return True
        except Exception as exc:  # the database is away: ask again later
            log.warning(
                "checkpoint push of %s waits: cannot ask whether %s is still this host's (%s)",
                item.dest,
                item.session,
                exc,
            )
            return False
        try:
            if lease is None:
                worksync.push(
                    item.cwd, self.remote, item.sha, item.dest, None, worksync.PUSH_TIMEOUT_S
                )
            elif lease != item.sha:
                self._push_over(item, lease)
        except (GitError, OSError, ValueError) as exc:
            self.failed += 1
            log.warning("checkpoint push failed (the run goes on; tried again later): %s", exc)
            return False
        self.pushed += 1
        if item.moves:
            with self._wake:
                self.seen[item.dest] = item.sha
        return True

    def _still_owner(self, session: str) -> bool:
        """Asked again before pushing over another host's push (False when nobody can say)."""
        try:
            return self.may_push is None or self.may_push(session)
        except Exception:  # the database is away: the failed push is tried again later
            return False

    def _push_over(self, item: Push, lease: str) -> None:
        """Push a moving ref as its owner: over a late push of the host that lost it, if any."""
        displaced = worksync.push_over(
            item.cwd,
            self.remote,
            self.host,
            item.sha,
            item.dest,
            lease,
            lambda: self._still_owner(item.session),
            worksync.PUSH_TIMEOUT_S,
        )
        if displaced is not None:
            self.displaced += 1
            log.warning(
                "checkpoint push: %s held %s, pushed after this host took %s over (a late push "
                "of the host that lost it); kept on this host's displaced ref, %s pushed over it",
                item.dest,
                displaced[:12],
                item.session,
                item.sha[:12],
            )
