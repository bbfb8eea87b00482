"""Shared fixtures: a real daemon in a thread on its real socket, and a leftover-process check."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pidns
import psutil
import pytest

from agentherd.sessions.config import load_config
from agentherd.supervisor.api.client import Client
from agentherd.supervisor.daemon import Daemon
from agentherd.supervisor.session.context import Timings

pytest_plugins = ["pgcluster", "clusterhosts", "realagents", "tmuxscreen"]
"""Fixtures shared by the cluster and the real-agent tests (pg_url, hosts, claude, ...)."""

FAST = Timings(
    tail_poll_s=0.05,
    adopt_poll_s=0.05,
    stop_poll_s=0.02,
    kill_wait_s=3.0,
    drain_wait_s=1.0,
    reconcile_s=0.2,
    jitter=lambda: 1.0,
)
"""Test timings: short polls, no jitter, so tests wait on conditions that come quickly."""

os.environ["HERD_STRICT_TRANSITIONS"] = "1"  # a move the lifecycle table forbids fails the test

PY = sys.executable
HERD = str(Path(sys.executable).parent / "herd")
TEST_ID_VAR = "HERD_TEST_ID"


def pid_gone(pid: int) -> bool:
    """True when no live (non-zombie) process has `pid`: one look, so a reap between two
    looks (pid_exists, then Process) cannot raise."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_until(
    predicate: Callable[[], Any], timeout_s: float = 30.0, what: str = "", poll_s: float = 0.02
) -> Any:
    """Poll `predicate` until it returns something truthy; fail the test after `timeout_s`.

    The default is generous: most waits start processes or git, which a loaded CI machine
    starts in seconds; a healthy wait returns as soon as the condition holds."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what or predicate}")
        time.sleep(poll_s)


def processes_of_test(test_id: str) -> list[psutil.Process]:
    """Live processes started during one test (they inherit its HERD_TEST_ID)."""
    found = []
    for proc in psutil.process_iter(["pid", "status"]):
        if proc.info["status"] == psutil.STATUS_ZOMBIE or proc.pid == os.getpid():
            continue
        try:
            if proc.environ().get(TEST_ID_VAR) == test_id:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


@pytest.fixture(autouse=True)
def no_leftover_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Tag every process a test starts; after the test, assert none is still alive."""
    test_id = uuid.uuid4().hex
    monkeypatch.setenv(TEST_ID_VAR, test_id)
    yield test_id
    left = processes_of_test(test_id)
    if left:
        described = [f"{p.pid} {' '.join(p.cmdline())[:80]}" for p in left if p.is_running()]
        for proc in left:
            try:
                proc.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(left, timeout=5)
        if described:
            raise AssertionError(f"processes left running: {described}")


def _inner_timeout_s(item: pytest.Item) -> float:
    """The timeout pytest-timeout applies to `item` (its marker, else the ini value)."""
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    return float(item.config.getini("timeout") or 120)


def pytest_configure(config: pytest.Config) -> None:
    """Once, before any worker starts: herd's bytecode written where its processes look for it.

    The suite starts hundreds of herd processes (daemons, the command line, the namespaced
    runs). Where the environment sets PYTHONDONTWRITEBYTECODE (this project's machines do), an
    editable install's modules have no bytecode and each of those processes compiled every
    module it imports again: +0.12 s of CPU a full command line, +0.16 s a daemon.
    """
    if hasattr(config, "workerinput") or os.environ.get(pidns.INSIDE_VAR):
        return
    import compileall

    import agentherd

    for folder in agentherd.__path__:
        compileall.compile_dir(folder, quiet=2)


WORKERS_PER_CORE = 2
"""`-n auto` starts this many test workers a core: most tests wait on real daemons, agents
and git rather than compute (on 2 cores with 4 workers the suite kept 1.3 of them busy)."""


@pytest.hookimpl(optionalhook=True)  # the pidns inner run loads no xdist
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """How many workers `-n auto` starts (the README's test command uses it)."""
    return WORKERS_PER_CORE * (os.cpu_count() or 1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Outside the namespace, a pidns test waits for its inner run: give it a longer timeout."""
    if os.environ.get(pidns.INSIDE_VAR):
        return
    for item in items:
        if item.get_closest_marker("pidns") is not None:
            outer_s = _inner_timeout_s(item) + pidns.OUTER_EXTRA_S
            item.add_marker(pytest.mark.timeout(outer_s), append=False)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """A pidns test runs again inside a private PID namespace under a sentinel (tests/pidns.py)."""
    if pyfuncitem.get_closest_marker("pidns") is None or os.environ.get(pidns.INSIDE_VAR):
        return None  # the body runs here, normally
    inner_s = _inner_timeout_s(pyfuncitem) - pidns.OUTER_EXTRA_S  # undo the outer extension
    report = pidns.run_in_pidns(pyfuncitem.nodeid, pyfuncitem.config.rootpath, inner_s)
    if report.problems():
        pytest.fail(report.failure_message(), pytrace=False)
    print(report.inner_output)  # shown with -s or -rP: figures a test printed inside
    return True


def git(cwd: Path, *args: str) -> str:
    """Run git with a fixed identity; return stdout."""
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def sleeping_fleet(folder: Path, *names: str) -> None:
    """herd.toml in `folder`: a session a name, each in a repo of its own, sleeping a minute."""
    (folder / "herd.toml").write_text(
        "".join(
            f'[[session]]\nname = "{name}"\ncwd = "{make_repo(folder / name)}"\n'
            f'command = ["{sys.executable}", "-c", "import time; time.sleep(60)"]\n'
            for name in names
        )
    )


def make_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    """A git repo with one commit of `files`."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    for name, text in (files or {"README.md": "hello\n"}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


SIMAGENT = [PY, "-m", "agentherd.supervisor.sim.simagent"]


def sim_repo(path: Path, features: int = 4) -> Path:
    """A git repo set up by the simulated agent's initializer (plan, progress, first commit)."""
    make_repo(path)
    subprocess.run(
        [*SIMAGENT, "--init", str(features), "--one-per-run", "--delay", "0"],
        cwd=path,
        check=True,
        capture_output=True,
    )
    return path


class Herd:
    """A herd.toml in a temp folder and a real daemon serving it from a thread."""

    def __init__(self, root: Path, timings: Timings = FAST) -> None:
        self.root = root
        self.timings = timings
        self.daemon: Daemon | None = None
        self.thread: threading.Thread | None = None
        self.errors: list[BaseException] = []
        self.backend_options: dict[str, Any] = {}
        """Passed to anyio.run: {"debug": True} runs the daemon's loop in asyncio debug mode."""

    @property
    def config_path(self) -> Path:
        return self.root / "herd.toml"

    def write(self, toml: str) -> Herd:
        self.config_path.write_text(textwrap.dedent(toml))
        return self

    def start(self) -> Client:
        """Start a daemon for the current herd.toml and return a client of it."""
        config = load_config(self.config_path)
        self.daemon = Daemon(config, timings=self.timings)

        def serve() -> None:
            try:
                anyio.run(self.daemon.serve, backend_options=self.backend_options)  # type: ignore[union-attr]
            except BaseException as exc:  # surfaced by the test through `errors`
                self.errors.append(exc)

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        client = Client(self.daemon.socket_path)
        wait_until(lambda: client.ping() or self.errors, what="daemon to answer")
        assert not self.errors, self.errors
        return client

    @property
    def client(self) -> Client:
        assert self.daemon is not None
        return Client(self.daemon.socket_path)

    def stop_daemon(self) -> None:
        """Exit the daemon, leaving agents running (as a crash of the daemon would)."""
        if self.thread is None:
            return
        self.client.call("shutdown")
        self.thread.join(10)
        self.thread = None

    def down(self) -> None:
        """`herd down`: stop every session, then the daemon."""
        if self.thread is None:
            return
        if self.client.ping():  # a test may have brought it down itself
            self.client.call("down", socket_timeout_s=None)
        self.thread.join(30)
        self.thread = None

    def status(self, name: str) -> dict[str, Any]:
        return self.client.call("status", target=name)  # type: ignore[no-any-return]

    def wait_state(self, name: str, *states: str, timeout_s: float = 30.0) -> dict[str, Any]:
        return wait_until(  # type: ignore[no-any-return]
            lambda: (s := self.status(name))["state"] in states and s,
            timeout_s,
            f"{name} to reach {states}",
        )

    def events(self, session: str | None = None, kind: str | None = None) -> list[dict[str, Any]]:
        found = self.client.call("events", session=session)
        return [e for e in found if kind is None or e["kind"] == kind]

    def cli(self, *args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
        """Run the real `herd` command in this folder."""
        return subprocess.run(
            [HERD, *args],
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )


@pytest.fixture
def herd(tmp_path: Path) -> Iterator[Herd]:
    """A Herd whose daemon is brought down after the test."""
    instance = Herd(tmp_path)
    yield instance
    try:
        instance.down()
    finally:
        if instance.daemon is not None:
            shutil.rmtree(instance.root / ".herd", ignore_errors=True)


def script(code: str) -> str:
    """A TOML argv running `code` with this Python, for tiny real children."""
    import json

    return json.dumps([PY, "-c", textwrap.dedent(code)])
