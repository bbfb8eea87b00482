"""Host daemons for the cluster tests: `herd daemon --host NAME`, each in its own folder and
its own PID namespace, so killing a host kills it whole, daemon and agents, as a machine's
death would."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil
import pytest
from conftest import HERD, wait_until
from netcut import CuttableLink

from agentherd.sessions.config import load_config
from agentherd.supervisor.api.client import Client
from agentherd.supervisor.files.paths import socket_path_for

if TYPE_CHECKING:
    from agentherd.supervisor.cluster.fleet import ClusterFleet

DB_VAR = "HERD_TEST_DB"
DOWN_WAIT_S = 30
"""How long `herd down` may take to end a host (its agents stop within their stop_grace)."""


def cluster_toml(sessions: str, **cluster: object) -> str:
    """A herd.toml with `[cluster]` (its URL in $HERD_TEST_DB) and these sessions."""
    keys = {"database_url_env": DB_VAR, "lease": "3s", **cluster}
    lines = ["[cluster]"] + [
        f"{k} = {v!r}".replace("'", '"') if isinstance(v, str) else f"{k} = {v}"
        for k, v in keys.items()
    ]
    return "\n".join(lines) + "\n\n" + textwrap.dedent(sessions)


class HostProc:
    """One host: a folder with its own herd.toml and its daemon in a PID namespace."""

    def __init__(self, root: Path, name: str, toml: str, url: str) -> None:
        self.root = root / name
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "herd.toml").write_text(toml)
        self.name = name
        self.url = url
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def client(self) -> Client:
        return Client(socket_path_for(self.root / ".herd"))

    def start(self) -> HostProc:
        log = open(self.root / "host.log", "ab")  # noqa: SIM115  (the child keeps it)
        self.process = subprocess.Popen(
            ["unshare", "--pid", "--fork", "--mount-proc", HERD, "daemon", "--host", self.name],
            cwd=self.root,
            env={**os.environ, DB_VAR: self.url},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        log.close()
        try:
            # A loaded machine starts a daemon and its engine slowly: a minute for each step.
            wait_until(
                lambda: self.client.ping() or self.process.poll() is not None,  # type: ignore[union-attr]
                60,
                f"host {self.name} to answer",
            )
            assert self.process.poll() is None, self.log()
            wait_until(self.ready, 60, f"host {self.name} to join the cluster")
        except BaseException:
            self.kill()  # not yet in the test's list of hosts: nobody else would end it
            raise
        return self

    def ready(self) -> bool:
        """The host's engine runs: the registry says so."""
        import psycopg

        with psycopg.connect(self.url) as conn:
            row = conn.execute(
                "SELECT ready FROM herd_hosts WHERE name = %s", (self.name,)
            ).fetchone()
        return bool(row and row[0])

    def log(self) -> str:
        return (self.root / "host.log").read_text(errors="replace")

    def down(self) -> None:
        """`herd down` on this host, then wait for its namespace to end: a host that stays
        up after `herd down` fails the test (it is killed first)."""
        if self.process is None or self.process.poll() is not None:
            return
        try:
            if self.client.ping():
                self.client.call("down", socket_timeout_s=None)
            self.process.wait(DOWN_WAIT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"host {self.name} still ran {DOWN_WAIT_S} s after herd down:\n{self.log()[-3000:]}"
            ) from None
        except BaseException:  # the test's timeout struck mid-way: never leave the host running
            self.kill()
            raise

    def kill(self) -> None:
        """The machine dies: SIGKILL to its namespace's first process ends every process in it."""
        if self.process is None or self.process.poll() is not None:
            return
        for child in psutil.Process(self.process.pid).children():
            os.kill(child.pid, signal.SIGKILL)
        self.process.wait(30)


@pytest.fixture
def hosts(tmp_path: Path, pg_url: str) -> Iterator[list[HostProc]]:
    """The hosts a test starts (it appends each as it starts it), each brought down after."""
    started: list[HostProc] = []
    yield started
    for host in started:
        host.down()


@pytest.fixture
def link(pg_url: str) -> Iterator[CuttableLink]:
    """The hosts' link to PostgreSQL, cut at once for all of them: the database is away (asked
    for before `hosts`, it is closed only once they are down; a viewer goes around it)."""
    address = pg_url.rsplit("/", 1)[0]
    server_host, server_port = address.rsplit("@", 1)[1].rsplit(":", 1)
    cuttable = CuttableLink(server_host, int(server_port))
    yield cuttable
    cuttable.close()


def through(link: CuttableLink, url: str) -> str:
    """`url` with its server reached through `link`."""
    address, database = url.rsplit("/", 1)
    return f"{address.rsplit(':', 1)[0]}:{link.port}/{database}"


def fleet_of(host: HostProc, url: str) -> ClusterFleet:
    """The cluster engine's client as `host`'s herd.toml configures it (close it after)."""
    from agentherd.supervisor.cluster.fleet import ClusterFleet  # the cluster extra

    return ClusterFleet(load_config(host.root / "herd.toml"), url)


def herd_cli(folder: Path, url: str, **env: str) -> functools.partial[Any]:
    """`subprocess.run` of `herd` verbs in `folder`, with the cluster's URL in $HERD_TEST_DB."""
    return functools.partial(
        subprocess.run,
        cwd=folder,
        env={**os.environ, DB_VAR: url, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
