"""A private PostgreSQL for the cluster tests: found, or started here, never the machine's own.

`.ci/run` starts one with `python tests/pgcluster.py start DIR` (and stops it in a trap) and
exports HERD_TEST_PG_URL. Without that variable, the `pg_url` fixture starts one itself when
Debian's PostgreSQL is installed. Without PostgreSQL a `cluster` test is skipped, or under
CI=true fails (as tests/realagents.py does for a missing agent CLI).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

URL_VAR = "HERD_TEST_PG_URL"
PG_USER = "postgres"
"""initdb refuses root: the data folder belongs to this system user when we are root."""
START_TIMEOUT_S = 60


def pg_bin(name: str) -> str | None:
    """A PostgreSQL server program: PATH first, then Debian's /usr/lib/postgresql/*/bin."""
    found = shutil.which(name)
    if found:
        return found
    for candidate in sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True):
        return candidate
    return None


def _as_owner(argv: list[str]) -> list[str]:
    """Run as the postgres user when we are root (the server refuses to run as root)."""
    if os.geteuid() != 0:
        return argv
    return ["runuser", "-u", PG_USER, "--", *argv]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(folder: Path) -> str:
    """initdb and start a server on a free loopback port; return its URL."""
    initdb, pg_ctl = pg_bin("initdb"), pg_bin("pg_ctl")
    if not initdb or not pg_ctl:
        raise RuntimeError("PostgreSQL is not installed (apt-get install -y postgresql)")
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)  # the postgres user must reach it (its parent too: use /tmp)
    data, sockets = folder / "data", folder / "sock"
    sockets.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "HERD_TEST_ID"}
    if os.geteuid() == 0:
        owner = pwd.getpwnam(PG_USER)
        for path in (folder, sockets):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    _run(_as_owner([initdb, "-D", str(data), "-A", "trust", "-U", PG_USER, "--no-sync"]), env)
    port = _free_port()
    options = (
        f"-c listen_addresses=127.0.0.1 -p {port} -k {sockets} -c fsync=off "
        "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
    )
    log = folder / "server.log"
    _run(
        _as_owner(
            [
                pg_ctl,
                "-D",
                str(data),
                "-l",
                str(log),
                "-o",
                options,
                "-w",
                "-t",
                str(START_TIMEOUT_S),
                "start",
            ]
        ),
        env,
    )
    return f"postgresql://{PG_USER}@127.0.0.1:{port}/postgres"


def _run(argv: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd="/", check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[-1] if argv else ''} failed: {done.stderr or done.stdout}")


def stop(folder: Path) -> None:
    """Stop the server started in `folder` (fast: no client needs a clean goodbye)."""
    pg_ctl = pg_bin("pg_ctl")
    if pg_ctl and (folder / "data" / "postmaster.pid").exists():
        subprocess.run(
            _as_owner([pg_ctl, "-D", str(folder / "data"), "-m", "immediate", "-w", "stop"]),
            check=False,
            capture_output=True,
            cwd="/",
        )


def fresh_database(url: str) -> str:
    """A new empty database on the server at `url`; its URL (one per test: no shared state)."""
    import psycopg

    name = f"herd_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return url.rsplit("/", 1)[0] + f"/{name}"


def require_postgres(why: str, module_level: bool = False) -> None:
    """Skip (or under CI=true fail) a cluster test that has no PostgreSQL to run against."""
    message = f"{why}: install PostgreSQL (apt-get install -y postgresql) or set {URL_VAR}"
    if os.environ.get("CI") == "true":
        pytest.fail(message + " (CI=true: a missing PostgreSQL fails the run)", pytrace=False)
    pytest.skip(message, allow_module_level=module_level)


EXTRA_REQUIRED_VAR = "HERD_TEST_CLUSTER_EXTRA"
"""Set to `required` (as `.ci/run` does for its cluster pass) and a missing extra fails."""


def cluster_extra_missing() -> str | None:
    """Why the cluster extra cannot be imported, or None when it can."""
    try:
        import dbos  # noqa: F401
        import psycopg  # noqa: F401
    except ImportError as exc:
        return f"the cluster extra is not installed ({exc.name}): pip install -e '.[cluster]'"
    return None


def require_cluster_extra(module_level: bool = True) -> None:
    """Skip a test that needs `pip install -e '.[cluster]'` when it is absent.

    The README's test command installs `.[test]` only, so without the extra these tests skip
    (CI=true included); `.ci/run` then runs them with the extra and
    HERD_TEST_CLUSTER_EXTRA=required, where a missing extra fails."""
    why = cluster_extra_missing()
    if why is None:
        return
    if os.environ.get(EXTRA_REQUIRED_VAR) == "required":
        pytest.fail(why + f" ({EXTRA_REQUIRED_VAR}=required)", pytrace=False)
    pytest.skip(why, allow_module_level=module_level)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The URL of a PostgreSQL server for this test run: $HERD_TEST_PG_URL, or a private one."""
    given = os.environ.get(URL_VAR)
    if given:
        yield given
        return
    if not pg_bin("initdb"):
        require_postgres("no PostgreSQL server programs (initdb, pg_ctl) found")
    require_cluster_extra(module_level=False)
    folder = Path(tempfile.mkdtemp(prefix="herd-test-pg-"))
    folder.chmod(0o755)  # the server runs as the postgres user when we are root
    try:
        yield start(folder / "pg")
    finally:
        stop(folder / "pg")
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: str) -> str:
    """A fresh database of its own for one test."""
    return fresh_database(pg_server)


if __name__ == "__main__":
    verb, where = sys.argv[1], Path(sys.argv[2])
    if verb == "start":
        print(start(where))
    else:
        stop(where)
