"""A host whose token went stale pushes no herd ref: not `last`, not `verified`, not its
rescue refs. Right before each push it asks the database whether the session is still its own
under the token of the attempt it was handed."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import git, make_repo, wait_until
from pgcluster import require_cluster_extra

require_cluster_extra()

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]


def remote_refs(bare: Path) -> str:
    return subprocess.run(
        ["git", "for-each-ref", "refs/herd"], cwd=bare, capture_output=True, text=True, check=True
    ).stdout


def pusher_for(repo: Path, bare: Path, url: str, host: str, token: int) -> Any:
    """A pusher for `host`, handed the session under `token`, with its events in hand."""
    from agentherd.supervisor.cluster import leases, owners
    from agentherd.supervisor.cluster.pusher import CheckpointPusher

    ownership = owners.Ownership(host, ["job"])
    ownership.fenced = False
    ownership.mine("job", token)

    def may_push(session: str) -> bool:
        with leases.connect(url) as conn:
            return ownership.may_push(conn, session)

    sha = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "update-ref", "refs/herd/job/rescue/1", sha)
    events = [
        {"seq": 1, "session": "job", "kind": "checkpoint", "data": {"sha": sha}},
        {"seq": 2, "session": "job", "kind": "verify-passed", "data": {"sha": sha}},
        {
            "seq": 3,
            "session": "job",
            "kind": "rescue-saved",
            "data": {"ref": "refs/herd/job/rescue/1", "sha": sha},
        },
    ]
    pages = [events]
    return CheckpointPusher(
        str(bare),
        host,
        lambda _s: repo,
        lambda _since: iter(()),
        lambda _since: pages.pop() if pages else [],
        may_push,
    )


def test_a_stale_hosts_pushes_of_every_herd_ref_are_refused(tmp_path: Path, pg_url: str) -> None:
    from agentherd.supervisor.cluster import leases, owners

    repo = make_repo(tmp_path / "repo")
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    with leases.connect(pg_url) as conn:
        leases.ensure_schema(conn)
        stale = owners.grant(conn, "job", "h1", "herd:job:1:1:on:h1")
        owners.grant(conn, "job", "h2", "herd:job:1:2:on:h2")  # the session moved on
    pusher = pusher_for(repo, bare, pg_url, "h1", stale)
    pusher.start()
    try:
        wait_until(lambda: pusher.refused == 3, 30, "h1's three pushes to be refused")
    finally:
        pusher.stop()
    assert pusher.pushed == 0 and remote_refs(bare) == ""

    with leases.connect(pg_url) as conn:
        current = owners.grant(conn, "job", "h1", "herd:job:1:3:on:h1")  # back to h1
    pusher = pusher_for(repo, bare, pg_url, "h1", current)
    pusher.start()
    try:
        wait_until(lambda: pusher.pushed == 3, 30, "h1's three pushes")
    finally:
        pusher.stop()
    refs = remote_refs(bare)
    for ref in ("refs/herd/job/last", "refs/herd/job/verified", "refs/herd/job/hosts/h1/rescue/1"):
        assert ref in refs, refs
