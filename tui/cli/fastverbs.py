"""The session verbs (start, stop, kill, restart, pause, resume, approve, reject, ack, wait,
send) on the fast path: the request sent and the reply printed as the full command line
prints them (tui/cli/sessionverbs.py), without click or pydantic (~0.3 s of CPU a verb ->
tens of ms; tests/test_fastverbs.py).

Anything else (`--json`, `--help`, a [cluster], no daemon, another version) goes to the full
command line, and only before the request is sent: a request the daemon may have acted on is
never sent twice.
"""

from __future__ import annotations

import sys

from agentherd.sessions.states import WAIT_TIMEOUT_EXIT, WAIT_UNREACHABLE_EXIT, State
from agentherd.supervisor.api.errorcodes import FORBIDDEN, PERSON_CODES
from agentherd.tui import render
from agentherd.tui.cli.fastcall import ErrorReply, NoAnswer, call, local_socket
from agentherd.tui.cli.fastview import view

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a verb milliseconds of CPU: not imported to run
    from typing import Any

EXIT_PERSON = 2
EXIT_INTERNAL = 70
EXIT_FORBIDDEN = 77
"""common.EXIT_*: tests/test_fastverbs.py checks they agree."""
TASK_ENDED = frozenset({"failed", "completed", "stopped"})
"""sessionverbs.TASK_ENDED: an approval or a rejection after these does not continue a run."""
ENDED_GATE_LINES = {
    "approve": ("plan approved", "a new task against the approved plan"),
    "reject": ("plan restored", "the agent again on the restored items"),
}
"""What approve and reject say, and what a start then runs when the task had ended."""
CONTROLS = ("pause", "resume", "approve", "reject")
KNOWN_STATES = frozenset(state.value for state in State)


def parse(argv: list[str]) -> tuple[str | None, str, dict[str, Any]] | None:
    """(the -c/--config value, the op, its arguments) for a verb taken here; else None."""
    config: str | None = None
    rest = list(argv)
    if rest[:1] in (["-c"], ["--config"]) and len(rest) >= 2:
        config, rest = rest[1], rest[2:]
    elif rest[:1] and rest[0].startswith("--config="):
        config, rest = rest[0].split("=", 1)[1], rest[1:]
    if not rest:
        return None
    verb, args = rest[0], rest[1:]
    flags = [a for a in args if a.startswith("-")]
    words = [a for a in args if not a.startswith("-")]
    if verb == "wait":
        request = _wait_request(args)
        return None if request is None else (config, "wait", request)
    if verb == "send":
        request = _send_request(args)
        return None if request is None else (config, "send", request)
    if verb == "restart" and len(words) == 1 and not flags:
        return config, "restart", {"name": words[0], "from": None}
    if verb == "start" and len(words) == 1 and flags in ([], ["--now"]):
        return config, "start", {"name": words[0], **({"now": True} if flags else {})}
    if verb in ("stop", "kill") and len(words) == 1 and flags in ([], ["--no-wait"]):
        request = {"name": words[0], "kill": verb == "kill", "no_wait": bool(flags)}
        return config, "stop", request
    if verb in CONTROLS and len(words) == 1 and not flags:
        return config, verb, {"name": words[0]}
    if verb == "ack" and len(words) in (1, 2) and not flags:
        return config, "ack", {"name": words[0], "kind": words[1] if len(words) == 2 else None}
    return None


def _wait_request(args: list[str]) -> dict[str, Any] | None:
    """`wait TARGET [--timeout S] [--until A,B]` as the request; None for anything else (the
    full command line words a mistake, an unknown state included)."""
    target: str | None = None
    options: dict[str, str] = {}
    index = 0
    while index < len(args):
        arg = args[index]
        if arg in ("--timeout", "--until") and arg not in options and index + 1 < len(args):
            options[arg] = args[index + 1]
            index += 2
        elif not arg.startswith("-") and target is None:
            target = arg
            index += 1
        else:
            return None
    if target is None:
        return None
    try:
        timeout_s = float(options["--timeout"]) if "--timeout" in options else None
    except ValueError:
        return None
    request: dict[str, Any] = {"target": target, "timeout_s": timeout_s}
    if "--until" in options:
        states = [word.strip() for word in options["--until"].split(",") if word.strip()]
        if not states or any(state not in KNOWN_STATES for state in states):
            return None
        request["until"] = states
    return request


def _send_request(args: list[str]) -> dict[str, Any] | None:
    """`send NAME TEXT [--wait] [--timeout S]` as the request; None for anything else (TEXT
    `-`, standard input, too: read here, it would be gone if the full command line answered)."""
    words: list[str] = []
    request: dict[str, Any] = {"wait": False}
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--wait" and not request["wait"]:
            request["wait"] = True
        elif arg == "--timeout" and "timeout_s" not in request and index + 1 < len(args):
            try:
                request["timeout_s"] = float(args[index + 1])
            except ValueError:
                return None
            index += 1
        elif not arg.startswith("-"):
            words.append(arg)
        else:
            return None
        index += 1
    if len(words) != 2:
        return None
    return {"name": words[0], "text": words[1], **request}


def fast_verb(argv: list[str]) -> bool:
    """Send one session verb to the local daemon and print its reply; False to use the full
    command line (nothing was sent)."""
    parsed = parse(argv)
    if parsed is None:
        return False
    config, op, request = parsed
    socket_path = local_socket(config)
    if socket_path is None:
        return False
    try:
        reply = call(socket_path, op, socket_timeout_s=_socket_timeout(op, request), **request)
    except ErrorReply as exc:
        sys.stderr.write(f"herd: {exc.message}\n")
        if exc.code == FORBIDDEN:
            sys.exit(EXIT_FORBIDDEN)
        sys.exit(EXIT_PERSON if exc.code in PERSON_CODES else EXIT_INTERNAL)
    except NoAnswer as exc:
        sys.stderr.write(f"herd: {exc}\n")
        sys.exit(EXIT_INTERNAL)
    except (OSError, ValueError, LookupError):
        return False  # before the request went out: the full command line words it
    sys.exit(_print(op, request, reply))


def _socket_timeout(op: str, request: dict[str, Any]) -> float | None:
    """How long the reply may take, as the full command line's client waits for it."""
    if op in ("stop", "wait", "restart") or (op == "send" and request["wait"]):
        return None
    return 120.0 if op == "send" else 30.0


def _print(op: str, request: dict[str, Any], reply: dict[str, Any]) -> int:
    """Print `reply` as the full command line does; the exit code."""
    out = sys.stdout.write
    name = request.get("name")
    state, reason = reply.get("state"), reply.get("reason")
    with_reason = f"{state} ({reason})" if reason else str(state)
    if op == "send":
        said = render.send_said(str(name), view(reply), request["wait"], request.get("timeout_s"))
        out(f"{said}\n")
    elif op == "restart":
        out(f"{reply.get('handle')}\n")
    elif op == "start":
        out(f"{reply.get('handle')}\n")
        note = render.chain_note(str(reply.get("session")), str(state), reason)
        if note:
            sys.stderr.write(f"herd: {reply.get('handle')} {note}\n")
    elif op == "stop":
        out(f"{name}: {with_reason}\n")
        if state == "failed" and reason == "unkillable":
            return EXIT_INTERNAL
    elif op in ("pause", "resume"):
        out(f"{name}: {state}\n")
    elif op in ("approve", "reject"):
        plan = reply.get("plan")
        passing = f"{plan.get('passing')}/{plan.get('total')}" if plan else "None/None"
        said, then = ENDED_GATE_LINES[op]
        out(f"{name}: {said} ({passing} passing); {with_reason}\n")
        if state in TASK_ENDED:
            out(f"herd start {name} runs {then}\n")
    elif op == "ack":
        what = request.get("kind") or "every open warning"
        left = len(reply.get("warnings") or [])
        out(f"{name}: acknowledged {what}; {left} warning(s) left on the badge\n")
    elif op == "wait":
        return _print_wait(request, reply)
    return 0


def _print_wait(request: dict[str, Any], reply: dict[str, Any]) -> int:
    """sessionverbs.wait's lines; its exit code is the daemon's."""
    handle, state, reason = reply.get("handle"), reply.get("state"), reply.get("reason")
    with_reason = f"{state} ({reason})" if reason else str(state)
    code = int(reply.get("exit", EXIT_INTERNAL))
    states = request.get("until")
    if code == WAIT_TIMEOUT_EXIT:
        sys.stderr.write(f"{handle}: still {state} after {request['timeout_s']:g}s\n")
    elif code == WAIT_UNREACHABLE_EXIT and states is not None:
        sys.stderr.write(
            f"{handle}: {with_reason}, and it will not be "
            f"{' or '.join(states)} without a start (`herd start {request['target']}`)\n"
        )
    else:
        sys.stdout.write(f"{handle}: {with_reason}\n")
    return code
