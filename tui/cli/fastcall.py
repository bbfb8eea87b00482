"""The daemon's socket found and called as the full command line would, without importing it:
what the fast verbs (fastpath.py, fastup.py) share."""

from __future__ import annotations

import os
import sys

from agentherd.tui.cli import fastwire

TYPE_CHECKING = False
if TYPE_CHECKING:  # pathlib and typing cost a verb ~10 ms of CPU: neither is imported to run
    from typing import Any

CONFIG_NAME = "herd.toml"
STATE_DIR_NAME = ".herd"
FAST_TIMEOUT_S = 30.0
PROTOCOL = 1
"""protocol.PROTOCOL, repeated: importing that module reads package metadata (tens of ms);
tests/test_fastpath.py checks they agree."""


class DaemonBusy(LookupError):
    """The daemon is there but at its connection cap: the full command line words it."""


_VERSION_FOUND: list[str | None] = []
"""installed_version's answer once looked up: a cold `herd up` asks at each look for its daemon."""


def installed_version() -> str | None:
    """This herd's version from its dist-info folder's name, as importlib.metadata finds it
    (without importing it), or None."""
    if not _VERSION_FOUND:
        _VERSION_FOUND.append(_version_from_path())
    return _VERSION_FOUND[0]


def _version_from_path() -> str | None:
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.startswith("agentherd-") and name.endswith(".dist-info"):
                return name[len("agentherd-") : -len(".dist-info")]
    return None


def config_path(explicit: str | None) -> str | None:
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


def socket_path_of(config_file: str) -> str | None:
    """`paths.socket_path_for` the state folder of `config_file`, or None where that would
    first have to make or mend the runtime folder (the full command line does)."""
    state_dir = os.path.realpath(os.path.join(os.path.dirname(config_file), STATE_DIR_NAME))
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


def across_hosts(config_file: str) -> bool:
    """True when herd.toml may have a [cluster] table (the full command line asks the cluster):
    any line that starts with `[cluster` or `cluster`, read without parsing TOML."""
    try:
        with open(config_file, "rb") as config:
            text = config.read()
    except OSError:
        return True
    if b"cluster" not in text:
        return False
    return any(line.lstrip().startswith((b"[cluster", b"cluster")) for line in text.splitlines())


def local_socket(explicit: str | None) -> str | None:
    """The socket of this herd.toml's daemon, or None where the full command line must answer:
    no herd.toml, no runtime folder yet, or a [cluster] (it asks across hosts)."""
    path = config_path(explicit)
    if path is None or across_hosts(path):
        return None
    return socket_path_of(path)


class NoAnswer(OSError):
    """The request went out but no reply came back (the daemon went away meanwhile): it may have
    acted: a verb that changes something never sends it again (a read may)."""


class ErrorReply(LookupError):
    """The daemon answered with an error: its code and message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def call(
    socket_path: str, op: str, socket_timeout_s: float | None = FAST_TIMEOUT_S, **args: Any
) -> Any:
    """One request on the control socket; raises LookupError on any error reply (ErrorReply
    for the daemon's own) and NoAnswer when the request went out but no reply came."""
    version = installed_version()
    if version is None:
        raise LookupError("no installed version: the full command line copes")
    with fastwire.LineSocket(socket_path, socket_timeout_s) as sock:
        # Only once connected: a cold `herd up` (no daemon to answer) spawns it ~7 ms of CPU
        # sooner without the import (`re`, `enum`); the verbs that find a daemon need it anyway.
        import json

        hello = {"op": "hello", "version": version, "protocol": PROTOCOL}
        sock.send(json.dumps(hello).encode() + b"\n")
        greeting = json.loads(sock.readline().decode())
        result = greeting.get("result") or {}
        if (greeting.get("error") or {}).get("code") == "busy":
            raise DaemonBusy("at its connection cap")
        if not greeting.get("ok") or result.get("protocol") != PROTOCOL:
            raise LookupError("hello refused")
        if result.get("version") != version:
            raise LookupError("another version: the full command line warns")
        sock.send(json.dumps({"id": 1, "op": op, **args}).encode() + b"\n")
        try:
            reply = json.loads(sock.readline().decode())
        except (OSError, ValueError) as exc:
            said = f"the daemon went away during `{op}` ({exc}); see .herd/daemon.log"
            raise NoAnswer(said) from None
    if not reply.get("ok"):
        error = reply.get("error") if isinstance(reply.get("error"), dict) else {}
        raise ErrorReply(str(error.get("code")), str(error.get("message")))
    return reply.get("result")
