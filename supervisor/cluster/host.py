"""`herd daemon --host NAME`: this machine's daemon, as today, plus its place in the cluster.

The daemon runs in the main thread exactly as `herd daemon` does. Beside it, a thread joins
the host registry (a lease), starts DBOS as executor NAME once the daemon answers, renews the
lease (fencing on failure) and recovers the workflows of hosts whose lease has expired.
"""

from __future__ import annotations

import logging
import threading
import time

from agentherd.sessions.clusterconfig import host_names
from agentherd.sessions.config import HerdConfig
from agentherd.supervisor.api.launcher import client_for
from agentherd.supervisor.cluster import engine, fencing, fleetspend, leases, owners, publish
from agentherd.supervisor.cluster.movework import MovingWork
from agentherd.supervisor.daemon import run_foreground

log = logging.getLogger(__name__)
DAEMON_ANSWER_TIMEOUT_S = 30.0


def sessions_for(config: HerdConfig, host: str) -> list[str]:
    """The sessions this host may run: in its own herd.toml, and naming it (or no host)."""
    return [
        s.name for s in config.sessions if (names := host_names(s.host)) is None or host in names
    ]


class ClusterHost:
    """The cluster side of one host's daemon: lease, engine, recovery of dead hosts."""

    def __init__(self, config: HerdConfig, host: str, url: str) -> None:
        assert config.cluster is not None
        self.config = config
        self.cluster = config.cluster
        self.host = host
        self.url = url
        self.client = client_for(config)
        sessions = sessions_for(config, host)
        self.ownership = owners.Ownership(host, sessions)
        self.keeper = leases.LeaseKeeper(
            url,
            host,
            leases.host_identity(config.state_dir),
            sessions,
            self.cluster.lease,
            on_fence=self._fence,
            ownership=self.ownership,
            grace_s=self.cluster.grace_s,
        )
        self.publisher = publish.Publisher(url, host, self.keeper.identity, self.client)
        self.spend = fleetspend.FleetSpend(url, host)
        self._stop = threading.Event()
        self._launched = False
        self.recovered: list[str] = []
        self.work = MovingWork(config, host, self.client, self._may_push)

    def _may_push(self, session: str) -> bool:
        """Whether this host may push the session's herd refs: asked of the database right
        before each push (a database out of reach raises: the pusher asks again later)."""
        with leases.connect(self.url, self.keeper.interval_s) as conn:
            return self.ownership.may_push(conn, session)

    def _fence(self) -> None:
        fencing.stop_every_agent(self.client)

    def join(self) -> None:
        """Take this host's lease before the daemon starts (HostNameTaken: exit 2), and keep
        renewing it from now on (starting the engine can take longer than a lease). What this
        host still owns is read here, before its daemon restarts or re-adopts anything."""
        self.keeper.join()
        if self.keeper.revoked:
            log.warning(
                "cluster: host %s was away past its lease; no longer its own: %s",
                self.host,
                ", ".join(self.keeper.revoked),
            )
        self.keeper.start()
        self.spend.start()

    def stop_not_owned(self) -> list[str]:
        """Stop (SIGKILL) this host's active sessions that the cluster gave elsewhere."""
        if self.keeper.fenced:
            return []  # the fence stops them all
        return fencing.stop_not_owned(self.client, self.ownership.owns)

    def run(self) -> None:
        """In a thread: wait for the daemon, start the engine, keep the lease, recover."""
        deadline = time.monotonic() + DAEMON_ANSWER_TIMEOUT_S
        while not self.client.ping():
            if self._stop.wait(0.05) or time.monotonic() > deadline:
                return
        self.work.start()
        engine.launch(
            self.url,
            self.host,
            self.client,
            self.cluster.max_sessions,
            self.cluster.max_sessions_per_host,
            self.work.before_start,
        )
        self._launched = True
        engine._Local.publisher = self.publisher
        engine._Local.ownership = self.ownership
        self.publisher.flush()  # a viewer lists this host's sessions once tasks may come
        threading.Thread(target=self.publisher.run, name="herd-publish", daemon=True).start()
        self.keeper.ready()
        log.info("host %s joined the cluster", self.host)
        while not self._stop.wait(self.keeper.interval_s):
            self.recover_dead()
            try:
                self.stop_not_owned()
            except Exception as exc:  # the daemon is going down: nothing to enforce
                log.warning("cluster: cannot stop sessions not owned: %s", exc)

    def recover_dead(self) -> None:
        """Claim hosts whose lease has expired and re-enqueue their pending workflows."""
        if self.keeper.fenced:
            return
        try:
            with leases.connect(self.url, self.keeper.interval_s) as conn:
                dead = leases.claim_dead(conn, self.host)
        except Exception as exc:  # a partition: the lease keeper fences; try again later
            log.warning("cluster: cannot look for dead hosts: %s", exc)
            return
        if dead:
            count = engine.recover(dead)
            self.recovered.extend(dead)
            log.warning("cluster: hosts %s are dead; recovered %d workflows", dead, count)

    def leave_on_signal(self) -> None:
        """SIGTERM or SIGINT, while the daemon still serves: take no new work (the engine
        stops first, so what its steps were waiting on stays pending for another host), and
        stop this host's agents within their stop_grace; `stop` then gives the lease up."""
        self._stop.set()
        try:
            if self._launched:
                engine.shutdown()
                self._launched = False
            fencing.stop_for_shutdown(self.client)
        except Exception as exc:  # the daemon goes down all the same
            log.error("cluster: shutting down: %s", exc)

    def stop(self) -> None:
        """Leave the cluster: stop renewing, give the lease up, stop the engine."""
        self._stop.set()
        self.publisher.stop()
        self.spend.stop()
        self.keeper.stop()
        self.work.stop()
        if self._launched:
            engine.shutdown()


def run_host(config: HerdConfig, host: str) -> None:
    """`herd daemon --host NAME`: serve until `herd down`, SIGTERM or SIGINT."""
    assert config.cluster is not None
    url = config.cluster.database_url()
    assert url is not None  # `herd check` / cluster_problems said so first
    member = ClusterHost(config, host, url)
    member.join()
    thread = threading.Thread(target=member.run, name="herd-cluster", daemon=True)
    thread.start()
    try:
        run_foreground(
            config,
            owns=member.ownership.owns,
            fleet_share=member.spend,
            on_stop_signal=member.leave_on_signal,
        )
    finally:
        member.stop()
        thread.join(5)
