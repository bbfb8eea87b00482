"""The `herd` entry point: `status ... --json` and `ls --json` pass the daemon's JSON through
without importing click, pydantic or anyio (a verb in ~half the time), and `down` prints its
reply the same way; every other command, and every error, goes to the full command line."""

from __future__ import annotations

import json
import os
import sys
import time

from agentherd.tui.cli import fastwire

TYPE_CHECKING = False
if TYPE_CHECKING:  # pathlib and typing cost a verb ~10 ms of CPU: neither is imported to run
    from typing import Any

CONFIG_NAME = "herd.toml"
STATE_DIR_NAME = ".herd"
FAST_TIMEOUT_S = 30.0
DAEMON_EXIT_TIMEOUT_S = 15.0
"""cli.DAEMON_EXIT_TIMEOUT_S: `herd down` waits this long for the daemon process to exit."""
DAEMON_EXIT_POLL_S = 0.02
EXIT_INTERNAL = 70
PROTOCOL = 1
"""protocol.PROTOCOL, repeated: importing that module reads package metadata (tens of ms);
tests/test_fastpath.py checks they agree."""


def installed_version() -> str | None:
    """This herd's version from its dist-info folder's name, as importlib.metadata finds it
    (without importing it), or None."""
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.startswith("agentherd-") and name.endswith(".dist-info"):
                return name[len("agentherd-") : -len(".dist-info")]
    return None


def _split(argv: list[str]) -> tuple[str | None, list[str]] | None:
    """(the -c/--config value, the rest) when argv is a JSON status or ls; else None."""
    config: str | None = None
    rest = list(argv)
    if rest and rest[0] in ("-c", "--config") and len(rest) >= 2:
        config, rest = rest[1], rest[2:]
    elif rest and rest[0].startswith("--config="):
        config, rest = rest[0].split("=", 1)[1], rest[1:]
    if not rest or "--json" not in rest:
        return None
    verb, args = rest[0], [a for a in rest[1:] if a != "--json"]
    if rest.count("--json") != 1 or any(a.startswith("-") for a in args):
        return None
    if (verb == "status" and len(args) <= 1) or (verb == "ls" and not args):
        return config, rest
    return None


def _config_path(explicit: str | None) -> str | None:
    """herd.toml as `find_config` finds it (explicit, $HERD_CONFIG, nearest upward), or None."""
    chosen = explicit or os.environ.get("HERD_CONFIG")
    if chosen:
        path = os.path.expanduser(chosen)
        return os.path.realpath(path) if os.path.isfile(path) else None
    folder = os.path.realpath(os.getcwd())
    while True:
        candidate = os.path.join(folder, CONFIG_NAME)
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _socket_path(config_path: str) -> str | None:
    """`paths.socket_path_for` the config's state folder, or None where that would first have
    to make or mend the runtime folder (the full command line does)."""
    state_dir = os.path.realpath(os.path.join(os.path.dirname(config_path), STATE_DIR_NAME))
    digest = fastwire.sha256_hex(state_dir.encode())[:16]
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and os.path.isdir(base):
        folder = os.path.join(base, "herd")
    else:
        folder = f"/tmp/herd-{os.getuid()}"
    try:
        info = os.stat(folder)
    except OSError:
        return None
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        return None
    return os.path.join(folder, f"{digest}.sock")


def _call(socket_path: str, op: str, timeout_s: float | None = FAST_TIMEOUT_S, **args: Any) -> Any:
    """One request on the control socket; raises LookupError on any error reply."""
    version = installed_version()
    if version is None:
        raise LookupError("no installed version: the full command line copes")
    with fastwire.LineSocket(socket_path, timeout_s) as sock:
        hello = {"op": "hello", "version": version, "protocol": PROTOCOL}
        sock.send(json.dumps(hello).encode() + b"\n")
        greeting = json.loads(sock.readline().decode())
        result = greeting.get("result") or {}
        if not greeting.get("ok") or result.get("protocol") != PROTOCOL:
            raise LookupError("hello refused")
        if result.get("version") != version:
            raise LookupError("another version: the full command line warns")
        sock.send(json.dumps({"id": 1, "op": op, **args}).encode() + b"\n")
        reply = json.loads(sock.readline().decode())
    if not reply.get("ok"):
        raise LookupError("error reply: the full command line words it")
    return reply.get("result")


def fast(argv: list[str]) -> bool:
    """Answer a JSON `status`/`ls` straight from the daemon; False to use the full CLI."""
    split = _split(argv)
    if split is None:
        return False
    config, rest = split
    path = _config_path(config)
    socket_path = _socket_path(path) if path is not None else None
    if socket_path is None:
        return False
    args = [a for a in rest[1:] if a != "--json"]
    try:
        if rest[0] == "ls":
            result = _call(socket_path, "ls")
        else:
            target = args[0] if args else None
            result = _call(socket_path, "status", target=target)
    except (OSError, ValueError, LookupError):
        return False
    sys.stdout.write(json.dumps(result, indent=2) + "\n")
    return True


def _down_config(argv: list[str]) -> tuple[str | None] | None:
    """(the -c/--config value,) when argv is a plain `down`; else None."""
    if argv[:1] in (["-c"], ["--config"]) and len(argv) == 3:
        return (argv[1],) if argv[2] == "down" else None
    if len(argv) == 2 and argv[0].startswith("--config="):
        return (argv[0].split("=", 1)[1],) if argv[1] == "down" else None
    return (None,) if argv == ["down"] else None


def _process_gone(pid: int) -> bool:
    """True once `pid` has ended (or is a zombie): read from /proc, never signalled."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            return stat_file.read().rpartition(b")")[2].split()[:1] == [b"Z"]
    except FileNotFoundError:
        return True


def fast_down(argv: list[str]) -> bool:
    """`herd down` as the full command line does it, without importing it (seconds of a
    loaded machine's time before the first session stops); False to use the full CLI."""
    split = _down_config(argv)
    path = _config_path(split[0]) if split is not None else None
    socket_path = _socket_path(path) if path is not None else None
    if socket_path is None:
        return False
    try:
        pid = int(_call(socket_path, "info")["pid"])
    except (OSError, ValueError, LookupError, KeyError, TypeError):
        return False  # the full command line words the error (no daemon, another version)
    try:
        result = _call(socket_path, "down", timeout_s=None)
    except (OSError, ValueError, LookupError) as exc:
        sys.stderr.write(
            f"herd: the daemon went away during `herd down` ({exc}); see .herd/daemon.log\n"
        )
        sys.exit(EXIT_INTERNAL)
    for status in result.get("stopped") or []:
        sys.stdout.write(f"{status.get('session')}: {status.get('state')}\n")
    sys.stdout.flush()
    deadline = time.monotonic() + DAEMON_EXIT_TIMEOUT_S
    while not _process_gone(pid):
        if time.monotonic() > deadline:
            sys.stderr.write(
                f"herd: the daemon (pid {pid}) is still running after "
                f"{DAEMON_EXIT_TIMEOUT_S:g}s; see .herd/daemon.log\n"
            )
            sys.exit(EXIT_INTERNAL)
        time.sleep(DAEMON_EXIT_POLL_S)
    if result.get("left"):
        from agentherd.sessions.status import DownReply
        from agentherd.tui.cli.cli import left_running_line

        reply = DownReply.model_validate(result)
        sys.stderr.write(f"herd: {left_running_line(reply.left, reply.waited_s)}\n")
        sys.exit(EXIT_INTERNAL)
    sys.stdout.write("herd: daemon stopped\n")
    return True


def main() -> None:
    """`herd`: the fast path when it applies, else the full command line."""
    if fast(sys.argv[1:]) or fast_down(sys.argv[1:]):
        return
    from agentherd.tui.cli.fastup import fast_up  # a module of its own: the other verbs skip it

    if fast_up(sys.argv[1:]):
        return
    from agentherd.tui.cli.cli import main as full

    full()
