"""The `herd` entry point: `status [TARGET]` and `ls` (with `--json` or not) print the daemon's
JSON, or the table and detail tui/render.py makes of it, without importing click, pydantic or
anyio or reading herd.toml's TOML (at 1,000 sessions: 0.8 s of CPU -> tens of ms), and `down`
prints its reply the same way; every other command, every error, and a herd.toml with a
[cluster] go to the full command line."""

from __future__ import annotations

import os
import sys
import time

from agentherd.tui.cli.fastcall import ErrorReply, call, config_path, local_socket, socket_path_of

DAEMON_EXIT_TIMEOUT_S = 15.0
"""cli.DAEMON_EXIT_TIMEOUT_S: `herd down` waits this long for the daemon process to exit."""
DAEMON_EXIT_POLL_S = 0.02
EXIT_INTERNAL = 70
EXIT_FORBIDDEN = 77
"""common.EXIT_FORBIDDEN: `down` asked from inside a session (tests/test_fastpath.py checks)."""


def _split(argv: list[str]) -> tuple[str | None, list[str]] | None:
    """(the -c/--config value, the rest) when argv is `status [TARGET]` or `ls`, with or
    without `--json`; else None."""
    config: str | None = None
    rest = list(argv)
    if rest and rest[0] in ("-c", "--config") and len(rest) >= 2:
        config, rest = rest[1], rest[2:]
    elif rest and rest[0].startswith("--config="):
        config, rest = rest[0].split("=", 1)[1], rest[1:]
    if not rest or rest.count("--json") > 1:
        return None
    verb, args = rest[0], [a for a in rest[1:] if a != "--json"]
    if any(a.startswith("-") for a in args):
        return None
    if (verb == "status" and len(args) <= 1) or (verb == "ls" and not args):
        return config, rest
    return None


def _columns() -> int:
    """shutil.get_terminal_size().columns without importing shutil: $COLUMNS, the terminal's
    width, else 80."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def _for_people(verb: str, target: str | None, result: object) -> str:
    """The table or the detail the full command line prints (tui/render.py on plain JSON)."""
    from agentherd.tui import render
    from agentherd.tui.cli.fastview import view

    if verb == "status" and target is not None:
        return render.detail(view(result))
    return render.table(view(result), _columns())


def fast(argv: list[str]) -> bool:
    """Answer `status`/`ls` straight from the daemon; False to use the full CLI."""
    split = _split(argv)
    if split is None:
        return False
    config, rest = split
    socket_path = local_socket(config)
    if socket_path is None:
        return False
    args = [a for a in rest[1:] if a != "--json"]
    target = args[0] if args else None
    printed = "--json" in rest and target is None  # the fleet's, indented by the daemon
    try:
        if rest[0] == "ls":  # archived sessions are out of `ls` (`--all` takes the full CLI)
            if printed:
                result = call(socket_path, "ls", printed=True, archived=False)
            else:
                result = [s for s in call(socket_path, "ls") if not s.get("archived")]
        else:
            extra = {"printed": True} if printed else {}
            result = call(socket_path, "status", target=target, **extra)
    except (OSError, ValueError, LookupError):
        return False
    if printed and isinstance(result, str):
        sys.stdout.write(result + "\n")
    elif "--json" in rest:
        import json  # imported by the call already: `call` says why it is imported there

        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        sys.stdout.write(_for_people(rest[0], target, result) + "\n")
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
    except (FileNotFoundError, ProcessLookupError):  # reaped between the open and the read
        return True


def fast_down(argv: list[str]) -> bool:
    """`herd down` as the full command line does it, without importing it (seconds of a
    loaded machine's time before the first session stops); False to use the full CLI."""
    split = _down_config(argv)
    path = config_path(split[0]) if split is not None else None
    socket_path = socket_path_of(path) if path is not None else None
    if socket_path is None:
        return False
    try:
        pid = int(call(socket_path, "info")["pid"])
    except (OSError, ValueError, LookupError, KeyError, TypeError):
        return False  # the full command line words the error (no daemon, another version)
    try:
        result = call(socket_path, "down", socket_timeout_s=None)
    except ErrorReply as exc:  # refused, not gone: one line, as the full command line says it
        sys.stderr.write(f"herd: {exc.message}\n")
        sys.exit(EXIT_FORBIDDEN if exc.code == "forbidden" else EXIT_INTERNAL)
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


SESSION_VERBS = frozenset(
    {"start", "stop", "kill", "restart", "pause", "resume", "approve", "reject", "ack"}
    | {"wait", "send"}
)
"""The verbs tui/cli/fastverbs.py may answer (its module is imported for these alone)."""


def main() -> None:
    """`herd`: the fast path when it applies, else the full command line."""
    if fast(sys.argv[1:]) or fast_down(sys.argv[1:]):
        return
    read_verbs = (["events"], ["report"], ["logs"], ["diff"])
    if sys.argv[1:2] in read_verbs or sys.argv[3:4] in read_verbs:
        from agentherd.tui.cli.fastread import fast_read

        if fast_read(sys.argv[1:]):
            return
    if any(verb in SESSION_VERBS for verb in (sys.argv[1:2] + sys.argv[3:4])):
        from agentherd.tui.cli.fastverbs import fast_verb

        if fast_verb(sys.argv[1:]):
            return
    from agentherd.tui.cli.fastup import fast_up  # a module of its own: the other verbs skip it

    if fast_up(sys.argv[1:]):
        return
    from agentherd.tui.cli.cli import run

    run()
