"""The `herd` entry point: `status ... --json` and `ls --json` pass the daemon's JSON through
without importing click, pydantic or anyio (a verb in ~half the time); every other command,
and every error, goes to the full command line."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

CONFIG_NAME = "herd.toml"
STATE_DIR_NAME = ".herd"
FAST_TIMEOUT_S = 30.0
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


def _config_path(explicit: str | None) -> Path | None:
    """herd.toml as `find_config` finds it (explicit, $HERD_CONFIG, nearest upward), or None."""
    chosen = explicit or os.environ.get("HERD_CONFIG")
    if chosen:
        path = Path(chosen).expanduser()
        return path.resolve() if path.is_file() else None
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / CONFIG_NAME).is_file():
            return folder / CONFIG_NAME
    return None


def _call(socket_path: Path, op: str, **args: Any) -> Any:
    """One request on the control socket; raises LookupError on any error reply."""
    version = installed_version()
    if version is None:
        raise LookupError("no installed version: the full command line copes")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(FAST_TIMEOUT_S)
        sock.connect(str(socket_path))
        reader = sock.makefile("rb")
        hello = {"op": "hello", "version": version, "protocol": PROTOCOL}
        sock.sendall(json.dumps(hello).encode() + b"\n")
        greeting = json.loads(reader.readline())
        result = greeting.get("result") or {}
        if not greeting.get("ok") or result.get("protocol") != PROTOCOL:
            raise LookupError("hello refused")
        if result.get("version") != version:
            raise LookupError("another version: the full command line warns")
        sock.sendall(json.dumps({"id": 1, "op": op, **args}).encode() + b"\n")
        reply = json.loads(reader.readline())
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
    if path is None:
        return False
    from agentherd.supervisor.paths import socket_path_for

    args = [a for a in rest[1:] if a != "--json"]
    try:
        if rest[0] == "ls":
            result = _call(socket_path_for(path.parent / STATE_DIR_NAME), "ls")
        else:
            target = args[0] if args else None
            result = _call(socket_path_for(path.parent / STATE_DIR_NAME), "status", target=target)
    except (OSError, ValueError, LookupError):
        return False
    sys.stdout.write(json.dumps(result, indent=2) + "\n")
    return True


def main() -> None:
    """`herd`: the fast path when it applies, else the full command line."""
    if fast(sys.argv[1:]):
        return
    from agentherd.tui.cli import main as full

    full()
