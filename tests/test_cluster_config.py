"""`[cluster]` in herd.toml and a session's `host`: checked with one line each, exit 2."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import HERD
from pgcluster import cluster_extra_missing, require_cluster_extra

from agentherd.sessions.config import load_config

CLUSTER = '[cluster]\ndatabase_url_env = "HERD_TEST_DB"\nmax_sessions = 3\n'
SESSION = '[[session]]\nname = "a"\ncommand = ["true"]\n'


def check(folder: Path, text: str, **env: str) -> subprocess.CompletedProcess[str]:
    (folder / "herd.toml").write_text(text)
    environ = {k: v for k, v in os.environ.items() if k != "HERD_TEST_DB"}
    return subprocess.run(
        [HERD, "check"], cwd=folder, capture_output=True, text=True, env={**environ, **env}
    )


@pytest.mark.cluster
def test_a_cluster_with_its_url_in_the_environment_checks(tmp_path: Path) -> None:
    require_cluster_extra(module_level=False)
    text = CLUSTER + SESSION + 'host = ["h1", "h2"]\n'
    result = check(tmp_path, text, HERD_TEST_DB="postgresql://herd@127.0.0.1:5432/herd")
    assert result.returncode == 0, result.stderr
    config = load_config(tmp_path / "herd.toml")
    assert config.cluster is not None and config.cluster.max_sessions == 3
    assert config.cluster.lease == 30.0
    assert config.cluster.grace_s == 30.0  # none named: as long as the lease
    assert config.cluster.checkpoint_remote is None  # nothing is pushed unless named
    assert config.sessions[0].host == ["h1", "h2"]


def test_a_cluster_without_the_extra_says_how_to_install_it(tmp_path: Path) -> None:
    if cluster_extra_missing() is None:
        pytest.skip("the cluster extra is installed here: herd check accepts the cluster")
    text = CLUSTER + SESSION + 'host = ["h1", "h2"]\n'
    result = check(tmp_path, text, HERD_TEST_DB="postgresql://herd@127.0.0.1:5432/herd")
    assert (result.returncode, result.stderr) == (
        2,
        "herd.toml: cluster: the cluster needs the cluster extra: "
        "pip install 'agentherd[cluster]'\n",
    )


def test_without_a_cluster_nothing_changes(tmp_path: Path) -> None:
    result = check(tmp_path, SESSION)
    assert result.returncode == 0, result.stderr
    assert load_config(tmp_path / "herd.toml").cluster is None


@pytest.mark.parametrize(
    ("text", "env", "line"),
    [
        (
            CLUSTER + SESSION,
            {},
            "herd.toml: cluster.database_url_env: $HERD_TEST_DB is not set; export it with the "
            "PostgreSQL URL, like export HERD_TEST_DB=postgresql://USER:PASSWORD@HOST:5432/herd",
        ),
        (
            CLUSTER + SESSION,
            {"HERD_TEST_DB": "mysql://x@y/z"},
            "herd.toml: cluster.database_url_env: $HERD_TEST_DB does not hold a PostgreSQL URL "
            "(it should begin with postgresql://)",
        ),
        (
            SESSION + 'host = "h1"\n',
            {},
            'herd.toml: session "a": host: runs on a host of a cluster; add a [cluster] table',
        ),
        (
            SESSION + "host = []\n",
            {},
            'herd.toml: session "a": host: name at least one host, or leave host out to run '
            "on any host",
        ),
        (
            '[cluster]\ndatabase_url_env = "HERD_TEST_DB"\nlease = "1s"\n',
            {"HERD_TEST_DB": "postgresql://x@y/z"},
            "herd.toml: cluster.lease: must be at least 3s",
        ),
        (
            '[cluster]\ndatabase_url_env = "HERD_TEST_DB"\ncheckpoint_remote = "--upload-pack=x"\n',
            {"HERD_TEST_DB": "postgresql://x@y/z"},
            'herd.toml: cluster.checkpoint_remote: must be a git remote name or URL, like "herd" '
            'or "ssh://git.example/work.git"',
        ),
    ],
)
def test_a_cluster_problem_is_one_line_and_exit_2(
    tmp_path: Path, text: str, env: dict[str, str], line: str
) -> None:
    result = check(tmp_path, text, **env)
    assert (result.returncode, result.stderr) == (2, line + "\n")


def test_the_url_itself_in_the_file_is_refused_and_never_echoed(tmp_path: Path) -> None:
    secret = "postgresql://herd:s3cret@db.example:5432/herd"
    result = check(tmp_path, f'[cluster]\ndatabase_url_env = "{secret}"\n')
    assert result.returncode == 2
    assert "never the URL itself" in result.stderr
    assert "s3cret" not in result.stderr and len(result.stderr.splitlines()) == 1


def test_a_negative_grace_is_refused_with_one_line(tmp_path: Path) -> None:
    result = check(tmp_path, CLUSTER + 'grace = "-5s"\n' + SESSION)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert "grace" in result.stderr, result.stderr
