"""What a request may ask, by who asks: a person, or an agent from inside a session.

A request whose client process is a run's (in its process tree, its process session, its
cgroup, or carrying its tag in the environment) or a verification's comes from inside that
session. It may read and act on its own session, and on the sessions its `manages` patterns
name; approve, reject, ack, up (reload) and down always need a person. The check is here, in
the daemon: a client cannot skip it. docs/reference.md ("What an agent may ask") says what is
and is not guaranteed.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agentherd.sessions.config import HerdConfig
from agentherd.supervisor.api.protocol import FORBIDDEN, ApiError
from agentherd.supervisor.files.store import Store
from agentherd.supervisor.process.peer import Lineage
from agentherd.supervisor.process.procs import CREATE_TIME_SLACK_S
from agentherd.supervisor.process.runid import RunIdentity
from agentherd.supervisor.session.supervisor import SessionSupervisor

PERSON_ONLY = {
    "approve": "`herd approve`",
    "reject": "`herd reject`",
    "ack": "`herd ack`",
    "link_ok": "an approval link's check",
    "up": "`herd up`",
    "reload": "`herd up` (reading herd.toml again)",
    "down": "`herd down`",
    "shutdown": "a shutdown of the daemon",
}
"""Operations only a person may ask, each as a person would name it."""

VERIFY_FOLDER = "verify"
"""`.herd/verify/<session>/<sha>-<tag>/`: a verification's scratch worktree (checks/observe.py)."""


class Runs(Protocol):
    """What the check needs to know of the daemon's runs."""

    def live(self) -> Iterator[tuple[str, RunIdentity]]:
        """(session, identity) of each session's current run."""
        ...

    def session_of_tag(self, tag: str) -> str | None:
        """The session one of whose runs carries `tag`, or None."""
        ...


class FleetRuns:
    """The runs of the daemon's sessions, as `scope_of` looks them up."""

    def __init__(self, sessions: Mapping[str, SessionSupervisor], store: Store | None) -> None:
        self.sessions = sessions
        self.store = store

    def live(self) -> Iterator[tuple[str, RunIdentity]]:
        for name, supervisor in self.sessions.items():
            if supervisor.run is not None:
                yield name, supervisor.run.identity

    def session_of_tag(self, tag: str) -> str | None:
        return self.store.session_of_tag(tag) if self.store is not None else None


@dataclass(frozen=True)
class Scope:
    """Who asks: a person (`homes` None), or the sessions its process is inside."""

    homes: frozenset[str] | None

    @property
    def person(self) -> bool:
        return self.homes is None

    def sees(self, name: str, config: HerdConfig) -> bool:
        """May read and act on session `name`: its own, or one every home's `manages` names."""
        if self.homes is None:
            return True
        if not self.homes:
            return False  # inside herd, its session unknown: nothing
        return all(name == home or _manages(config, home, name) for home in self.homes)

    def where(self) -> str:
        """`inside session 'a'` for messages."""
        if self.homes is None:
            return "a person"
        if not self.homes:
            return "a process herd could not identify (it exited, or /proc would not say)"
        names = ", ".join(repr(h) for h in sorted(self.homes))
        return f"inside session{'s' if len(self.homes) > 1 else ''} {names}"


PERSON = Scope(None)


def _manages(config: HerdConfig, home: str, name: str) -> bool:
    session = config.session(home)
    patterns = session.manages if session is not None else []
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def scope_of(lineage: Lineage | None, runs: Runs, state_dir: Path) -> Scope:
    """The asker's scope from its lineage: inside every session whose run marks it."""
    if lineage is None:
        return Scope(frozenset())
    leaders = {identity.pid: (name, identity) for name, identity in runs.live() if identity.pid}
    homes: set[str] = set()
    for process in lineage.processes:
        found = leaders.get(process.pid)
        if found and _same_start(process.create_time, found[1].create_time):
            homes.add(found[0])
        tags = {*process.env_tags, *([process.cgroup_tag] if process.cgroup_tag else [])}
        for tag in tags:
            name = _session_of_tag(tag, runs, state_dir)
            if name is not None:
                homes.add(name)
    return Scope(frozenset(homes)) if homes else PERSON


def _same_start(seen: float, known: float | None) -> bool:
    return known is not None and abs(seen - known) < CREATE_TIME_SLACK_S


def _session_of_tag(tag: str, runs: Runs, state_dir: Path) -> str | None:
    """The session of a run's or a verification's tag (a hex uuid, checked by the reader)."""
    for name, identity in runs.live():
        if identity.tag == tag:
            return name
    stored = runs.session_of_tag(tag)
    if stored is not None:
        return stored
    for folder in (state_dir / VERIFY_FOLDER).glob(f"*/*-{tag}"):
        return folder.parent.name
    return None


def named_sessions(request: Mapping[str, Any]) -> list[str]:
    """The sessions a checked request names: `name`, `session`, a target's name, `names`."""
    names = [request[key] for key in ("name", "session") if isinstance(request.get(key), str)]
    target = request.get("target")
    if isinstance(target, str):
        names.append(target.partition("/")[0])
    names.extend(n for n in request.get("names") or () if isinstance(n, str))
    return names


def authorize(request: Mapping[str, Any], scope: Scope, config: HerdConfig) -> None:
    """Raise `forbidden` for what the asker may not ask; a person may ask anything."""
    if scope.person:
        return
    asked = PERSON_ONLY.get(str(request.get("op")))
    if asked is not None:
        raise ApiError(
            FORBIDDEN,
            f"{asked} needs a person, and this request comes from {scope.where()}; "
            "run it from your own shell, not an agent's",
        )
    for name in named_sessions(request):
        if not scope.sees(name, config):
            raise ApiError(
                FORBIDDEN,
                f"session {name!r} is not for a request from {scope.where()}: an agent may "
                "read and act on its own session, and on those its `manages` in herd.toml names",
            )


class VisibleFleet(Mapping[str, Any]):
    """The daemon's sessions as one asker may see them (read live: a reload changes them)."""

    def __init__(
        self, sessions: Mapping[str, Any], scope: Scope, config: Callable[[], HerdConfig]
    ) -> None:
        self._sessions = sessions
        self._scope = scope
        self._config = config
        """The daemon's current herd.toml (a reload replaces it)."""

    def _shown(self, name: str) -> bool:
        return self._scope.sees(name, self._config())

    def __getitem__(self, name: str) -> Any:
        if not self._shown(name):
            raise KeyError(name)
        return self._sessions[name]

    def __iter__(self) -> Iterator[str]:
        config = self._config()
        return iter([n for n in self._sessions if self._scope.sees(n, config)])

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._sessions and self._shown(name)
