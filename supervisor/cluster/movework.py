"""A host's part in moving work: push its sessions' checkpoints, and before it runs a session
another host ran, reset the worktree to that session's last checkpoint on the remote.

All of it only with `[cluster] checkpoint_remote`: without it nothing is pushed or fetched.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentherd.sessions.config import HerdConfig
from agentherd.sessions.states import ACTIVE_STATES
from agentherd.supervisor.api.client import Client
from agentherd.supervisor.api.protocol import ApiError
from agentherd.supervisor.cluster import worksync
from agentherd.supervisor.cluster.pusher import CheckpointPusher
from agentherd.supervisor.git.gitproc import GitError

log = logging.getLogger(__name__)
EVENTS_PAGE = 1000


class MovingWork:
    """The checkpoint pusher and the sync before a moved session's run, for one host."""

    def __init__(
        self,
        config: HerdConfig,
        host: str,
        client: Client,
        may_push: Callable[[str], bool] | None = None,
    ) -> None:
        assert config.cluster is not None
        self.config = config
        self.host = host
        self.client = client
        self.remote = config.cluster.checkpoint_remote
        self.pusher: CheckpointPusher | None = None
        if self.remote is not None:
            self.pusher = CheckpointPusher(
                self.remote, host, self._cwd_of, self._events, self._history, may_push
            )

    def _cwd_of(self, session: str) -> Path | None:
        found = self.config.session(session)
        return found.cwd if found is not None else None

    def _events(self, since: int) -> Any:
        return self.client.stream("events", since=since, follow=True)

    def _history(self, since: int) -> list[dict[str, Any]]:
        page: list[dict[str, Any]] = self.client.call("events", since=since, limit=EVENTS_PAGE)
        return page

    def start(self) -> None:
        """Begin pushing (nothing without a checkpoint remote)."""
        if self.pusher is not None:
            self.pusher.start()

    def stop(self) -> None:
        """Stop pushing."""
        if self.pusher is not None:
            self.pusher.stop()

    def before_start(self, session: str) -> None:
        """Before the engine starts `session` here: bring its work from the remote.

        Skipped when the session already runs here (a DBOS step run again after this daemon
        restarted: the run is this host's own). A failure is a warning, and the run starts on
        this host's folder as it is, as a restart goes on after a failed reset.
        """
        config = self.config.session(session)
        if self.remote is None or self.pusher is None or config is None:
            return
        try:
            if self.client.call("status", target=session)["state"] in ACTIVE_STATES:
                return
        except ApiError:
            return
        last_ref = worksync.session_ref(session, "last")
        try:
            synced = worksync.sync_worktree(
                config.cwd, self.remote, session, config.restart_from, [self.config.path]
            )
            if synced is not None and synced.sha != synced.last:
                # Reset to the last verified checkpoint: the later commits stay on the remote.
                moved = f"refs/herd/{session}/before-reset/moved-{synced.last[:12]}"
                worksync.push(
                    config.cwd,
                    self.remote,
                    synced.last,
                    worksync.host_ref(session, self.host, moved),
                    None,
                    worksync.PUSH_TIMEOUT_S,
                )
        except (GitError, OSError, ValueError) as exc:
            log.warning(
                "%s: could not bring its work from %s (%s); it starts on this host's folder as is",
                session,
                self.remote,
                exc,
            )
            return
        if synced is None:
            return
        self.pusher.saw(last_ref, synced.last)
        log.warning(
            "%s: moved here: worktree %s reset to %s from %s%s",
            session,
            config.cwd,
            synced.sha[:12],
            self.remote,
            f" (its dirty tree saved on {synced.rescued})" if synced.rescued else "",
        )
