"""One client cannot kill the daemon: huge lines, too many connections, no file descriptors left."""

from __future__ import annotations

import json
import resource
import socket
import subprocess
import textwrap
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from conftest import PY, Herd, wait_until

from agentherd.sessions.config import load_config
from agentherd.supervisor.api.client import Client
from agentherd.supervisor.api.protocol import ApiError
from agentherd.supervisor.api.server import FD_SOFT_LIMIT, MAX_CONNECTIONS, MAX_REQUEST_BYTES
from agentherd.supervisor.files.paths import socket_path_for

IDLE = """
[[session]]
name = "idle"
command = ["true"]
autostart = false
"""


def idle_connections(stack: ExitStack, path: Path, count: int) -> list[socket.socket]:
    """Open `count` connections that never say a word; they close when `stack` does."""
    opened = []
    for _ in range(count):
        sock = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
        sock.settimeout(5)
        sock.connect(str(path))
        opened.append(sock)
    return opened


def read_reply(sock: socket.socket) -> dict[str, object]:
    buffer = b""
    while b"\n" not in buffer:
        chunk = sock.recv(65536)
        if not chunk:
            break
        buffer += chunk
    return json.loads(buffer.split(b"\n")[0])  # type: ignore[no-any-return]


def test_a_16_mib_request_line_ends_that_connection_not_the_daemon(herd: Herd) -> None:
    client = herd.write(IDLE).start()
    assert herd.daemon is not None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(herd.daemon.socket_path))
        try:
            sock.sendall(b"x" * ((16 << 20) + 4096))  # no newline: one endless line
        except (BrokenPipeError, ConnectionResetError):
            pass  # the daemon hung up after the first MiB, as it should
        reply = read_reply(sock)
    assert reply["ok"] is False
    assert reply["error"] == {  # type: ignore[comparison-overlap]
        "code": "bad-request",
        "message": f"request line longer than {MAX_REQUEST_BYTES} bytes; connection closed",
    }
    assert client.ping()
    assert client.call("status", target="idle")["state"] == "idle"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(herd.daemon.socket_path))
        sock.sendall(b"{not json\n")
        assert read_reply(sock)["error"]["code"] == "bad-request"  # type: ignore[index]
    assert client.ping()
    assert not herd.errors


def test_a_deeply_nested_request_is_a_bad_request_not_an_internal_error(herd: Herd) -> None:
    """400k levels of JSON fit in the 1 MiB line but overflow the parser's recursion."""
    client = herd.write(IDLE).start()
    assert herd.daemon is not None
    depth = 400_000
    nested = b'{"id": 1, "op": "ls", "x": ' + b"[" * depth + b"]" * depth + b"}\n"
    assert len(nested) < MAX_REQUEST_BYTES
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(herd.daemon.socket_path))
        sock.sendall(nested)
        reply = read_reply(sock)
    assert reply["ok"] is False
    error = reply["error"]
    assert isinstance(error, dict)
    assert error["code"] == "bad-request", error
    assert "nested" in error["message"]
    assert client.call("status", target="idle")["state"] == "idle"
    assert not herd.errors


def test_connections_over_the_cap_are_refused_politely_and_served_once_others_close(
    herd: Herd,
) -> None:
    client = herd.write(IDLE).start()
    assert herd.daemon is not None
    with ExitStack() as stack:
        idle_connections(stack, herd.daemon.socket_path, MAX_CONNECTIONS)
        wait_until(lambda: not client.ping(), what="the cap to be reached")
        with pytest.raises(ApiError) as refused:
            client.call("ls")
        assert refused.value.code == "busy"
        assert "close some" in refused.value.message
    # The daemon notices the 256 closes one by one: a ping may be served while some are still
    # counted, and the next call refused. Served means a real call answered, once all are seen.
    assert wait_until(
        lambda: idle_state_when_served(client) == "idle",
        what="a client to be served once the idle ones closed",
    )
    assert not herd.errors


def idle_state_when_served(client: Client) -> object:
    """The `idle` session's state, or None while the daemon still counts closed connections."""
    try:
        return client.call("status", target="idle")["state"]
    except ApiError as exc:
        assert exc.code == "busy", exc
        return None


def test_at_the_connection_cap_the_cli_says_the_daemon_is_busy(herd: Herd) -> None:
    """`herd ls` and `herd tui` must not read a busy daemon as none (and show saved state),
    nor `herd up` start a second one that waits 15 s for the first to answer."""
    client = herd.write(IDLE).start()
    assert herd.daemon is not None
    with ExitStack() as stack:
        idle_connections(stack, herd.daemon.socket_path, MAX_CONNECTIONS)
        wait_until(lambda: not client.ping(), what="the cap to be reached")
        for verb in (["ls"], ["status", "idle"], ["up", "--no-tui"]):
            done = herd.cli(*verb)
            assert "no daemon is running" not in done.stderr, (verb, done.stderr)
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("herd: the herd daemon is busy"), (
                verb,
                done.stderr,
            )
            assert done.returncode == 2, (verb, done.returncode)
            assert done.stdout == ""
    assert wait_until(
        lambda: idle_state_when_served(client) == "idle",
        what="a client to be served once the idle ones closed",
    )
    assert not herd.errors


@contextmanager
def daemon_with_fd_limit(
    root: Path, max_fds: int, hard_fds: int | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """A real daemon in a child process whose open-file limit is `max_fds` (hard: `hard_fds`)."""
    (root / "herd.toml").write_text(IDLE)
    config = load_config(root / "herd.toml")
    code = textwrap.dedent(f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_NOFILE, ({max_fds}, {hard_fds or max_fds}))
        from agentherd.supervisor.main import main
        sys.exit(main([{str(root / "herd.toml")!r}]))
    """)
    process = subprocess.Popen([PY, "-c", code], cwd=root, stdin=subprocess.DEVNULL)
    path = socket_path_for(config.state_dir)
    try:
        wait_until(lambda: Client(path).ping() or process.poll() is not None, what="daemon")
        assert process.poll() is None, "the daemon did not start"
        yield process, path
    finally:
        if process.poll() is None:
            try:
                Client(path).call("shutdown")
            except (ApiError, OSError):
                process.terminate()
        process.wait(15)


def test_running_out_of_file_descriptors_is_survived(tmp_path: Path) -> None:
    max_fds = 96
    with daemon_with_fd_limit(tmp_path, max_fds) as (daemon, path):
        with ExitStack() as stack:
            idle_connections(stack, path, max_fds + 40)  # the rest wait in the listen backlog
            log = tmp_path / ".herd" / "daemon.log"
            wait_until(
                lambda: (
                    "cannot accept a connection" in log.read_text() or daemon.poll() is not None
                ),
                what="the daemon to run out of file descriptors",
            )
            assert daemon.poll() is None, "the daemon died when accept() failed"
        assert wait_until(lambda: Client(path).ping(), what="the daemon to serve again")
        assert Client(path).call("status", target="idle")["state"] == "idle"
        assert daemon.poll() is None


def test_the_daemon_raises_its_soft_fd_limit(tmp_path: Path) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 2048:
        pytest.skip(f"the hard open-file limit here is {hard}")
    with daemon_with_fd_limit(tmp_path, 1024, hard) as (daemon, _):
        limits = Path(f"/proc/{daemon.pid}/limits").read_text()
        soft = int(next(line for line in limits.splitlines() if "open files" in line).split()[3])
        assert soft == min(FD_SOFT_LIMIT, hard)
