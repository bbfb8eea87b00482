"""docs/reference.md names exactly what the code has: keys, verbs, options, states, fields, kinds.

How the page is read (keep it this simple):
- `## ` headings split it into sections; `### ` headings into tables within a section.
- A documented name is the first cell of a table row, in backticks: "| `name` | ...".
- In "## herd.toml", each `### ` heading names its TOML table in backticks (`[fleet]`,
  `[keys]`, `[[session]]`, `budget`, `on_drift`), or is "### Top level".
- In "## CLI", each verb is a heading "### `herd VERB`" ("### `herd`" holds the global
  options); its rows are its options by their long name (`--json`).
- In "## Status fields", nested fields are dotted and list items take `[]`:
  `plan.changed_items[].index`.
"""

from __future__ import annotations

import ast
import json
import re
import typing
from pathlib import Path
from typing import Any

import click
from conftest import Herd, script, sim_repo, wait_until
from pydantic import BaseModel

from agentherd.sessions import config as config_module
from agentherd.sessions.config import HerdConfig, SessionConfig
from agentherd.sessions.keynames import TERMINAL_ACTION_IDS
from agentherd.sessions.records import EVENT_KINDS, RESERVED_EVENT_KINDS, WARNING_KINDS, Event
from agentherd.sessions.states import (
    REASON_PATTERNS,
    REASONS,
    WAIT_EXIT_CODES,
    WAIT_TIMEOUT_EXIT,
    WAIT_UNREACHABLE_EXIT,
    State,
    task_state,
)
from agentherd.tui.cli.cli import EXIT_FORBIDDEN, EXIT_INTERNAL, EXIT_PERSON, main
from agentherd.tui.dashboard.app import ACTION_IDS

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "reference.md"
SUPERVISOR = ROOT / "supervisor"

EXIT_INTERRUPTED = 130
"""`guarded` in tui/cli/cli.py exits with this on Ctrl-C."""

_ROW = re.compile(r"^\| `([^`]+)` \|")
_HEADING_NAME = re.compile(r"^### `([^`]+)`")


def doc_tables() -> dict[str, dict[str, list[list[str]]]]:
    """Section -> table heading ("" before the first) -> its rows, each a list of cells."""
    sections: dict[str, dict[str, list[list[str]]]] = {}
    section = table = ""
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            section, table = line[3:].strip(), ""
            sections.setdefault(section, {})
        elif line.startswith("### "):
            named = _HEADING_NAME.match(line)
            table = named.group(1) if named else line[4:].strip()
            sections.setdefault(section, {}).setdefault(table, [])
        elif _ROW.match(line):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            sections.setdefault(section, {}).setdefault(table, []).append(cells)
    return sections


def names(rows: list[list[str]]) -> list[str]:
    """The documented names: each row's first cell without its backticks."""
    return [row[0].strip("`") for row in rows]


def documented(section: str) -> dict[str, list[str]]:
    """Table heading -> the names its rows document, for one `## ` section."""
    tables = doc_tables()
    assert section in tables, f"docs/reference.md has no section '## {section}'"
    return {table: names(rows) for table, rows in tables[section].items()}


def flat(section: str) -> list[str]:
    """Every name documented in one section, across its tables."""
    return [name for table in documented(section).values() for name in table]


def assert_same(documented_names: list[str], code: set[str], what: str) -> None:
    """The page names exactly the code's set, each once."""
    repeated = sorted({n for n in documented_names if documented_names.count(n) > 1})
    missing = sorted(code - set(documented_names))
    stale = sorted(set(documented_names) - code)
    assert not (missing or stale or repeated), (
        f"docs/reference.md, {what}: add {missing}; remove {stale} (no longer in the code); "
        f"listed twice: {repeated}"
    )


# ----- herd.toml ----------------------------------------------------------------------------


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The config models a field holds (directly, or as list items)."""
    held = (annotation, *typing.get_args(annotation))
    return [arg for arg in held if isinstance(arg, type) and issubclass(arg, BaseModel)]


def config_tables() -> dict[str, set[str]]:
    """Every herd.toml table and its keys, from the pydantic models' fields, recursively."""
    toml_name = {"sessions": "session"}
    not_keys = {"path"}  # where herd.toml was found, set by the loader
    top = {toml_name.get(f, f) for f in HerdConfig.model_fields} - not_keys | {"defaults"}
    assert top == config_module.TOP_KEYS, "the keys parse_config accepts at the top level"
    keys = {*ACTION_IDS, *TERMINAL_ACTION_IDS}
    tables: dict[str, set[str]] = {"Top level": top, "[keys]": keys}

    def walk(model: type[BaseModel], label: str, depth: int) -> None:
        fields = set(model.model_fields) - not_keys
        if label != "Top level":
            assert tables.setdefault(label, fields) == fields, f"{label} means two tables"
        for field, info in model.model_fields.items():
            key = toml_name.get(field, field)
            for inner in _models_in(info.annotation):
                is_list = typing.get_origin(info.annotation) is list
                name = (f"[[{key}]]" if is_list else f"[{key}]") if depth == 0 else key
                walk(inner, name, depth + 1)
            if typing.get_origin(info.annotation) is dict:
                key_type = typing.get_args(info.annotation)[0]
                if typing.get_origin(key_type) is typing.Literal:  # fixed sub-keys: on_drift
                    tables[key] = set(typing.get_args(key_type))

    walk(HerdConfig, "Top level", 0)
    assert set(SessionConfig.model_fields) == tables["[[session]]"]
    return tables


def test_every_herd_toml_key_is_documented() -> None:
    code = config_tables()
    doc = documented("herd.toml")
    assert_same([t for t in doc if t], set(code), "herd.toml tables (### headings)")
    for table, keys in code.items():
        assert_same(doc[table], keys, f"keys of {table}")


# ----- the command line ---------------------------------------------------------------------


def _options(params: list[click.Parameter]) -> set[str]:
    """Each option by its long name (`--json` of `-f/--json`)."""
    return {max(p.opts, key=len) for p in params if isinstance(p, click.Option)}


def test_every_verb_and_option_is_documented() -> None:
    doc = documented("CLI")
    verbs = {f"herd {verb}" for verb in main.commands} | {"herd"}
    assert_same([t for t in doc if t], verbs, "verbs (### `herd VERB` headings)")
    assert_same(doc["herd"], _options(main.params), "global options")
    for verb, command in main.commands.items():
        assert_same(doc[f"herd {verb}"], _options(command.params), f"options of herd {verb}")


def test_every_exit_code_is_documented() -> None:
    codes = {0, EXIT_PERSON, EXIT_INTERNAL, EXIT_FORBIDDEN, WAIT_TIMEOUT_EXIT, EXIT_INTERRUPTED}
    codes.add(WAIT_UNREACHABLE_EXIT)
    assert_same(flat("Exit codes"), {str(c) for c in codes | set(WAIT_EXIT_CODES.values())}, "")


# ----- states, reasons ----------------------------------------------------------------------


def test_every_state_and_its_task_state_is_documented() -> None:
    rows = doc_tables()["States"][""]
    assert_same(names(rows), {s.value for s in State}, "states")
    for row in rows:
        state = row[0].strip("`")
        assert row[1].strip("`") == task_state(State(state)), f"task_state of {state}"


def test_every_reason_is_documented() -> None:
    assert_same(flat("Reasons"), set(REASONS) | set(REASON_PATTERNS), "reasons")


def _strings(node: ast.AST | None) -> set[str]:
    """The text constants in an expression (`"a" if x else "b"` holds two)."""
    if node is None or isinstance(node, ast.JoinedStr):
        return set()
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and type(n.value) is str}


def _called(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _param_defaults(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr]:
    """A function's parameters that have a default, with it."""
    positional = func.args.posonlyargs + func.args.args
    with_default = positional[len(positional) - len(func.args.defaults) :]
    found = {a.arg: d for a, d in zip(with_default, func.args.defaults, strict=True)}
    keyword = zip(func.args.kwonlyargs, func.args.kw_defaults, strict=True)
    found.update({a.arg: d for a, d in keyword if d is not None})
    return found


LIFECYCLE = ROOT / "sessions" / "lifecycle.py"
"""The pure rules the supervisor follows: they name reasons and task-ending kinds too."""


def _supervisor_trees() -> list[tuple[str, ast.Module]]:
    # the single-machine supervisor: its wings, not the cluster's engine or the simulator
    wings = [p for p in SUPERVISOR.rglob("*.py") if p.parent.name not in {"cluster", "sim"}]
    files = [*wings, LIFECYCLE]
    return [(p.name, ast.parse(p.read_text(encoding="utf-8"))) for p in files]


def _rule_returns() -> dict[str, set[str]]:
    """Each lifecycle function with the texts it can return (`task_end_kind` -> its kinds)."""
    tree = ast.parse(LIFECYCLE.read_text(encoding="utf-8"))
    return {
        func.name: set().union(
            *(_strings(r.value) for r in ast.walk(func) if isinstance(r, ast.Return))
        )
        for func in tree.body
        if isinstance(func, ast.FunctionDef)
    }


def test_the_supervisor_sets_only_listed_reasons() -> None:
    """Reasons in code: `_end_task`/`_set_state`'s second argument and every `reason=`."""
    used: dict[str, str] = {}
    for file, tree in _supervisor_trees():
        for node in ast.walk(tree):
            exprs: list[ast.AST] = []
            if isinstance(node, ast.Call):
                exprs += [k.value for k in node.keywords if k.arg == "reason"]
                if _called(node) in ("_end_task", "_transition") and len(node.args) >= 2:
                    exprs.append(node.args[1])
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                exprs += [d for p, d in _param_defaults(node).items() if p == "reason"]
            for expr in exprs:
                for text in _strings(expr):
                    used.setdefault(text, f"supervisor/{file}:{getattr(expr, 'lineno', '?')}")
    prefixes = tuple(pattern.split("<")[0] for pattern in REASON_PATTERNS)
    unlisted = {r: at for r, at in used.items() if r not in REASONS and not r.startswith(prefixes)}
    assert not unlisted, f"add these reasons to REASONS in sessions/states.py: {unlisted}"
    assert {"crash-loop", "unkillable", "user", "down"} <= set(used), "the scan finds reasons"


# ----- events -------------------------------------------------------------------------------

EMITTERS = ("make_event", "_event", "commit_daemon_event", "Event")
"""What builds an event: the kind is the first argument, or `kind=`."""


def _emits(call: ast.Call) -> bool:
    """A call that builds an event: one of EMITTERS, or the session pen's `pen.event(...)`."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "event":
        owner = func.value
        return (isinstance(owner, ast.Attribute) and owner.attr == "pen") or (
            isinstance(owner, ast.Name) and owner.id == "pen"
        )
    return _called(call) in EMITTERS


def emitted_kinds() -> dict[str, str]:
    """Every event kind the supervisor can write, with where: found with `ast`, not run.

    A kind given as a local name is followed to its assignments and its parameter default;
    a `kind="..."` keyword to any call counts too (helpers such as `_git_problem`).
    """
    kinds: dict[str, str] = {}
    unresolved: list[str] = []
    rule_returns = _rule_returns()
    for file, tree in _supervisor_trees():
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            assigned: dict[str, list[ast.AST]] = {}
            for node in ast.walk(func):
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            assigned.setdefault(target.id, []).append(node.value)
            read_back = {  # a loop over stored rows rebuilds events; it writes no new kind
                name.id
                for loop in ast.walk(func)
                if isinstance(loop, ast.For)
                for name in ast.walk(loop.target)
                if isinstance(name, ast.Name)
            }
            params = [a.arg for a in (*func.args.args, *func.args.kwonlyargs)]
            defaults = _param_defaults(func)
            for node in ast.walk(func):
                if not isinstance(node, ast.Call):
                    continue
                where = f"supervisor/{file}:{node.lineno}"
                for keyword in node.keywords:
                    if keyword.arg == "kind":
                        kinds.update(dict.fromkeys(_strings(keyword.value), where))
                if not _emits(node):
                    continue
                kind = next((k.value for k in node.keywords if k.arg == "kind"), None)
                if kind is None and _called(node) != "Event" and node.args:
                    kind = node.args[0]
                if not isinstance(kind, ast.Name):
                    if kind is not None:
                        kinds.update(dict.fromkeys(_strings(kind), where))
                    continue
                if kind.id in read_back:
                    continue
                sources = assigned.get(kind.id, []) + (
                    [defaults[kind.id]] if kind.id in defaults else []
                )
                passed_on = func.name in EMITTERS and kind.id in params  # a wrapper's parameter
                if not sources and not passed_on:
                    unresolved.append(where)
                for source in sources:
                    if isinstance(source, ast.Call) and _called(source) in rule_returns:
                        kinds.update(dict.fromkeys(rule_returns[_called(source) or ""], where))
                    kinds.update(dict.fromkeys(_strings(source), where))
    assert not unresolved, f"cannot tell which kind these events have; name it: {unresolved}"
    return kinds


def test_every_event_field_is_documented() -> None:
    fields = set(Event(at="", kind="x", message="").to_json())
    assert_same(flat("Event fields"), fields, "event fields")


def test_every_event_kind_is_documented_and_marked_warning_or_not() -> None:
    rows = doc_tables()["Event kinds"][""]
    assert_same(names(rows), set(EVENT_KINDS), "event kinds")
    marked = {row[0].strip("`") for row in rows if row[1] == "warning"}
    assert marked == set(WARNING_KINDS), "the warning column follows WARNING_KINDS"
    assert set(WARNING_KINDS) <= set(EVENT_KINDS)


def test_the_supervisor_emits_exactly_the_listed_kinds() -> None:
    emitted = emitted_kinds()
    unlisted = {k: at for k, at in emitted.items() if k not in EVENT_KINDS}
    assert not unlisted, (
        f"add these kinds to EVENT_KINDS in sessions/records.py (a drift kind: to DRIFT_KINDS in "
        f"sessions/drift.py): {unlisted}"
    )
    written_reserved = {k: at for k, at in emitted.items() if k in RESERVED_EVENT_KINDS}
    assert not written_reserved, (
        f"written now: take them out of RESERVED_EVENT_KINDS: {written_reserved}"
    )
    never = set(EVENT_KINDS) - RESERVED_EVENT_KINDS - set(emitted)
    assert not never, f"no code writes these kinds: remove them or reserve them: {sorted(never)}"
    assert len(emitted) >= 30, "the scan finds the supervisor's events"


# ----- status fields ------------------------------------------------------------------------


def field_names(value: Any, prefix: str = "") -> set[str]:
    """Dotted names of every field in a JSON object; a list's items take `[]`."""
    found: set[str] = set()
    for key, item in value.items():
        name = prefix + key
        found.add(name)
        if isinstance(item, dict):
            found |= field_names(item, name + ".")
        elif isinstance(item, list) and item and isinstance(item[0], dict):
            found |= field_names(item[0], name + "[].")
    return found


def status_field_names(herd: Herd) -> set[str]:
    """Every field of `herd status --json`, from a real daemon's reply with every part filled.

    With a pydantic status model, walk its fields instead (and keep `field_names`' naming).
    """
    repo = sim_repo(herd.root / "repo", features=2)
    herd.write(
        f"""
        [[session]]
        name = "api"
        cwd = "{repo}"
        command = {script("pass")}
        restart = "never"
        plan = "feature_list.json"
        progress = "claude-progress.txt"
        verify = "true"
        """
    )
    herd.start().call("start", name="api")
    herd.wait_state("api", "failed")  # plan-incomplete: the plan's items do not pass
    wait_until(lambda: (herd.status("api")["checkpoint"] or {}).get("verification"))
    plan = repo / "feature_list.json"
    items = json.loads(plan.read_text())
    (repo / "plan.tmp").write_text(json.dumps(items[:-1]))
    (repo / "plan.tmp").rename(plan)  # an item removed: plan.changed_items[] and a warning
    wait_until(lambda: herd.status("api")["plan"]["changed_items"], what="changed_items")
    plan.write_text('[{"description": "half written"')
    wait_until(lambda: herd.status("api")["plan"].get("error"), what="plan.error")
    (repo / "claude-progress.txt").write_bytes(b"\x00\x01 not a progress file")
    wait_until(lambda: herd.status("api")["progress"].get("error"), what="progress.error")
    return field_names(herd.status("api"))


def test_every_status_field_is_documented(herd: Herd) -> None:
    assert_same(flat("Status fields"), status_field_names(herd), "status fields")


def test_the_readme_links_the_reference() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(docs/reference.md)" in readme and "CONTRACT.md" not in readme
