"""`herd events`, `herd logs NAME` (without -f), `herd report NAME` and `herd diff` on the fast
path: the daemon's JSON printed as the full command line prints it, without click or pydantic
(fastpath.py)."""

from __future__ import annotations

import json
import os
import sys

from agentherd.tui.cli.fastcall import call, local_socket

EVENTS_PAGE = 1000
"""fleetapi.EVENTS_PAGE: events asked for a page at a time (tests/test_fastread.py checks)."""
REPORT_TIMEOUT_S = 120.0
"""fleetapi's report timeout: a report may run git."""
EVENT_FIELDS = (("seq", 0), ("at", None), ("session", None), ("run", None), ("kind", None))
"""Event.to_json's keys before `message` and `data`, with the model's defaults."""

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a verb milliseconds of CPU: not imported to run
    from typing import Any


def _options(args: list[str], valued: dict[str, str], flags: set[str]) -> dict[str, str] | None:
    """`--name VALUE` and `--flag` options by their canonical name; None for anything else
    (the full command line words the mistake)."""
    found: dict[str, str] = {}
    index = 0
    while index < len(args):
        arg = args[index]
        if arg in flags and arg not in found:
            found[arg] = ""
            index += 1
        elif arg in valued and index + 1 < len(args) and valued[arg] not in found:
            found[valued[arg]] = args[index + 1]
            index += 2
        else:
            return None
    return found


def _event_json(item: dict[str, Any]) -> dict[str, Any]:
    """Event.to_json of a wire event: its keys in the model's order, `host` only across hosts."""
    event = {key: item.get(key, default) for key, default in EVENT_FIELDS}
    event["message"], event["data"] = item.get("message"), item.get("data") or {}
    if item.get("host"):
        event["host"] = item["host"]
    return event


def _events(socket_path: str, args: list[str]) -> bool:
    valued = {"--since": "--since", "--session": "--session", "-n": "-n", "--lines": "-n"}
    options = _options(args, valued, {"--json"})
    if options is None:
        return False
    try:
        since = int(options.get("--since", "0"))
        last = int(options["-n"]) if "-n" in options else None
    except ValueError:
        return False
    if last is not None and last < 0:
        return False
    session = options.get("--session")
    events: list[dict[str, Any]] = []
    while True:
        page = call(socket_path, "events", since=since, session=session, limit=EVENTS_PAGE)
        events += page
        if len(page) < EVENTS_PAGE:
            break
        since = page[-1]["seq"]
    if last is not None:
        events = events[len(events) - last :] if last else []
    if "--json" in options:
        lines = [json.dumps(_event_json(item)) for item in events]
    else:
        from agentherd.tui import render
        from agentherd.tui.cli.fastview import view

        lines = [render.event_line(view(_event_json(item))) for item in events]
    sys.stdout.write("".join(line + "\n" for line in lines))
    return True


def _report(socket_path: str, args: list[str]) -> bool:
    names = [a for a in args if a != "--json"]
    if len(names) != 1 or names[0].startswith("-") or args.count("--json") > 1:
        return False
    result = call(socket_path, "report", socket_timeout_s=REPORT_TIMEOUT_S, name=names[0])
    if "--json" in args:
        sys.stdout.write(json.dumps(result["report"], indent=2) + "\n")
    else:
        sys.stdout.write(result["markdown"] + "\n")
    return True


def _logs(socket_path: str, args: list[str]) -> bool:
    """`logs NAME [-n N] [--run N] [--raw]`: a run's output printed as the full command line
    prints it (-f and --progress are the full command line's)."""
    names = [
        a
        for i, a in enumerate(args)
        if not a.startswith("-") and (i == 0 or args[i - 1] not in ("-n", "--tail", "--run"))
    ]
    if len(names) != 1:
        return False
    rest = list(args)
    rest.remove(names[0])
    valued = {"-n": "-n", "--tail": "-n", "--run": "--run"}
    options = _options(rest, valued, {"--raw"})
    if options is None:
        return False
    try:
        tail = int(options["-n"]) if "-n" in options else None
        run = int(options["--run"]) if "--run" in options else None
    except ValueError:
        return False
    if tail is not None and tail < 0:
        return False
    info = call(socket_path, "log_info", name=names[0], run=run)
    if not info.get("path"):
        return False  # no runs yet: the full command line says so
    from pathlib import Path

    from agentherd.tui.cli.follow import Printer, print_run

    terminal = sys.stdout.isatty()
    print_run(Path(info["path"]), Printer(terminal and "--raw" not in options), tail, terminal)
    return True


def _diff(socket_path: str, args: list[str]) -> bool:
    """`diff NAME [CHECKPOINT] [--against previous|verified] [--work] [--stat] [--file PATH]`
    as diffverb.py asks and prints it (`--json` is the full command line's)."""
    valued = {"--against", "--file"}
    words = [
        a
        for i, a in enumerate(args)
        if not a.startswith("-") and (i == 0 or args[i - 1] not in valued)
    ]
    if not 1 <= len(words) <= 2:
        return False
    rest = list(args)
    for word in words:
        rest.remove(word)
    options = _options(rest, {"--against": "--against", "--file": "--file"}, {"--work", "--stat"})
    if options is None or options.get("--against", "previous") not in ("previous", "verified"):
        return False
    from agentherd.tui.cli.diffprint import lines, page, replies
    from agentherd.tui.cli.fastview import view

    name, checkpoint = words[0], (words[1] if len(words) == 2 else None)
    texts = "--stat" not in options
    found = replies(
        lambda **request: view(call(socket_path, "diff", **request)),
        name,
        checkpoint,
        against=options.get("--against", "previous"),
        texts=texts,
        work="--work" in options,
        path=options.get("--file"),
    )
    colour = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    page("".join(line + "\n" for r in found for line in lines(r, texts, colour)))
    return True


def fast_read(argv: list[str]) -> bool:
    """Answer `events`, `report`, `logs` or `diff` from the daemon; False to use the full
    command line."""
    config: str | None = None
    if argv[:1] in (["-c"], ["--config"]) and len(argv) >= 3:
        config, argv = argv[1], argv[2:]
    socket_path = local_socket(config)
    if socket_path is None or not argv:
        return False
    verb, args = argv[0], argv[1:]
    try:
        if verb == "events":
            return _events(socket_path, args)
        if verb == "report":
            return _report(socket_path, args)
        if verb == "logs":
            return _logs(socket_path, args)
        if verb == "diff":
            return _diff(socket_path, args)
    except (OSError, ValueError, LookupError, KeyError, TypeError):
        return False
    return False
