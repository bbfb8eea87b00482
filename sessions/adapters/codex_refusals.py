"""Which commands Codex or its sandbox refused in one run, decided from the thread's rollout.

codex-cli 0.171 at times prints no ``command_execution`` item on stdout for a command that
ends at once (and never one for an escalation it rejects); its rollout file (``codex_rollout``)
always holds the ``function_call`` and its ``function_call_output``, and, per turn, a
``turn_context`` with the sandbox's permission profile. A call counts as refused only when:

- Codex rejected it without running it: the output is Codex's own "approval policy is ...;
  reject command" (the agent asked for ``require_escalated`` under approval policy never); or
- the sandbox refused a write: the process exited non-zero, its output has a read-only file
  system error (EROFS, which only a write gets; Linux's sandbox mounts read-only) naming a
  path, and the turn's profile is a managed, restricted one that leaves that path read-only
  (``.git`` under workspace-write); or an "Operation not permitted" error (EPERM, what macOS's
  sandbox gives) naming a path the profile carves read-only out of a writable root (``.git``:
  outside the sandbox the agent owns it, so nothing else refuses it there).
  With no sandbox (``danger-full-access``: profile ``disabled``) nothing is a refusal.

A failing test is none of these: its exit code alone, "Permission denied" (EACCES: reads get
it too, and a test can cause it inside the workspace), an EPERM without such a path (the
network filter gives it, but so do an ordinary kill or chown) and EROFS on a path the profile
lets it write are not refusals: a wrong one would fail a run that should restart.
Only entries stamped at or after the run's start count: ``codex exec resume`` appends the next
runs of a thread to the same file. Pure: the caller reads the file.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentherd.sessions.adapters import outcomes
from agentherd.sessions.times import parse_iso

SHELL_TOOLS = frozenset({"exec_command", "shell", "shell_command"})
"""The function names Codex runs commands with (``exec_command`` in 0.171)."""

MAX_PENDING_CALLS = 1024
"""Calls kept while their output is awaited (a run's output follows its call closely)."""

MAX_COMMAND_CHARS = 8192
"""Of a refused command line, what is read to name it."""

MAX_OUTPUT_CHARS = 65536
"""Of a command's output, the tail read for errors (Codex caps what it keeps itself)."""

_REJECTED = re.compile(r"approval policy is \S+; reject command")
"""Codex's own output for a command it would not run (no process was started)."""

_EXITED = re.compile(r"^Process exited with code (-?\d+)$", re.MULTILINE)
_EROFS = "read-only file system"
_EPERM = "operation not permitted"
_WINDOW_CHARS = 1024
"""Of a line, the text read on each side of an error for the path it names."""
_PATH_AFTER = re.compile(r"(?::|,\s*\w+)\s*(?:'([^'\n]+)'|\"([^\"\n]+)\"|(\S+))")
"""After the error: Python's ``Read-only file system: 'x'``, Node's ``..., open 'x'``."""

_SPECIAL_PATHS = {"root": "/", "slash_tmp": "/tmp"}
"""Profile entries named by kind whose path is fixed (``tmpdir`` is not: it is skipped)."""


@dataclass(frozen=True)
class SandboxPolicy:
    """The file system a turn's commands ran under, as its ``turn_context`` gave it."""

    sandboxed: bool
    cwd: str
    entries: tuple[tuple[str, bool], ...] = ()
    """(absolute path, writable), as listed; the longest path containing a file decides."""

    def writable(self, path: str) -> bool:
        """True when the sandbox lets a command write path (no sandbox: always)."""
        if not self.sandboxed:
            return True
        deciding = self._deciding(path)
        return deciding is not None and deciding[1]

    def carved_out(self, path: str) -> bool:
        """True when path is read-only inside a writable root (``.git`` of the worktree)."""
        deciding = self._deciding(path)
        if not self.sandboxed or deciding is None or deciding[1]:
            return False
        return any(can and len(root) < len(deciding[0]) for root, can in self._around(path))

    def _around(self, path: str) -> list[tuple[str, bool]]:
        """The entries whose path contains path."""
        return [
            (root, can_write)
            for root, can_write in self.entries
            if path == root or path.startswith(root.rstrip("/") + "/")
        ]

    def _deciding(self, path: str) -> tuple[str, bool] | None:
        """The entry that decides for path: the most specific; on a tie, the read-only one."""
        around = self._around(path)
        return max(around, key=lambda entry: (len(entry[0]), not entry[1])) if around else None


def policy_of(context: dict[str, Any]) -> SandboxPolicy | None:
    """A ``turn_context`` payload's sandbox, or None when its shape is not understood."""
    cwd = context.get("cwd")
    profile = context.get("permission_profile")
    if not isinstance(cwd, str) or not cwd.startswith("/") or not isinstance(profile, dict):
        return None
    if profile.get("type") == "disabled":
        return SandboxPolicy(False, cwd)
    files = profile.get("file_system")
    if profile.get("type") != "managed" or not isinstance(files, dict):
        return None
    if files.get("type") != "restricted" or not isinstance(files.get("entries"), list):
        return None
    entries = []
    for entry in files["entries"][:256]:
        found = _entry(entry)
        if found is not None:
            entries.append(found)
    return SandboxPolicy(True, cwd, tuple(entries))


def _entry(entry: object) -> tuple[str, bool] | None:
    """One profile entry as (absolute path, writable); None when it names no fixed path."""
    if not isinstance(entry, dict) or entry.get("access") not in ("read", "write", "none"):
        return None
    where = entry.get("path")
    if not isinstance(where, dict):
        return None
    path: object = None
    if where.get("type") == "path":
        path = where.get("path")
    elif where.get("type") == "special" and isinstance(where.get("value"), dict):
        path = _SPECIAL_PATHS.get(str(where["value"].get("kind")))
    if not isinstance(path, str) or not path.startswith("/"):
        return None
    return posixpath.normpath(path), entry["access"] == "write"


def command_name(command: object, line: str = "", path: str = "") -> str:
    """A short name for a refused command: the program of its refused part.

    A compound command (``echo saving && git commit``, inside a ``bash -lc`` wrapper or not)
    is named by the part the error names (``touch: cannot touch``), else the part naming the
    refused path (a redirect), else its first part that is more than a harmless word.
    """
    parts = _parts(command)
    if not parts:
        return "command"
    programs = [_program(part) for part in parts]
    lead = line.lstrip().split(":", 1)[0] if ":" in line else ""
    chosen = next((i for i, name in enumerate(programs) if name and name == lead), None)
    if chosen is None and path:
        chosen = next((i for i, part in enumerate(parts) if path in part), None)
    if chosen is None:
        chosen = next((i for i, name in enumerate(programs) if name not in _HARMLESS), 0)
    return outcomes.tool_name(programs[chosen]) or "command"


_HARMLESS = frozenset({"", "echo", "printf", "cd", "pwd", "true", ":", "export", "set", "sleep"})
"""Programs that write nothing themselves: a compound command is not named by them."""

_JOINS = frozenset({"&&", "||", ";", "|", "&"})
_SHELLS = frozenset({"bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/usr/bin/bash"})


def _parts(command: object, depth: int = 0) -> list[list[str]]:
    """The simple commands of a shell command line (its words each), unwrapping ``bash -lc``."""
    if isinstance(command, list):
        tokens = [part for part in command if isinstance(part, str)]
    elif isinstance(command, str):
        lexer = shlex.shlex(command[:MAX_COMMAND_CHARS], posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError:  # unbalanced quotes: words as they stand
            tokens = command[:MAX_COMMAND_CHARS].split()
    else:
        return []
    wrapped = len(tokens) == 3 and tokens[0] in _SHELLS and tokens[1] in ("-lc", "-c")
    if wrapped and depth < 2:
        return _parts(tokens[2], depth + 1)
    parts: list[list[str]] = [[]]
    for token in tokens:
        if token in _JOINS:
            parts.append([])
        else:
            parts[-1].append(token)
    return [part for part in parts if part]


def _program(part: list[str]) -> str:
    """The program a simple command runs: its first word after ``NAME=value`` settings."""
    for word in part:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", word):
            return posixpath.basename(word) or word
    return ""


def refused_command(arguments: dict[str, Any], output: str, policy: SandboxPolicy) -> str | None:
    """The name of the command when Codex or its sandbox refused this call, else None."""
    command = arguments.get("cmd", arguments.get("command"))
    if _REJECTED.match(output.lstrip()):
        return command_name(command)
    if not policy.sandboxed:
        return None
    header, marker, body = output.partition("\nOutput:\n")
    exited = _EXITED.search(header) if marker else None
    if exited is None or exited.group(1) == "0":
        return None
    base = policy.cwd
    workdir = arguments.get("workdir")
    if isinstance(workdir, str) and workdir:
        base = posixpath.join(base, workdir)
    tail = body[-MAX_OUTPUT_CHARS:]
    checks: tuple[tuple[str, Callable[[str], bool]], ...] = (
        (_EROFS, lambda path: not policy.writable(path)),
        (_EPERM, policy.carved_out),
    )
    for error, refuses in checks:
        for line, path in _paths_named(tail, error):
            # A path from the command's home ("~") is not known here: never a refusal.
            if not path.startswith("~") and refuses(posixpath.normpath(posixpath.join(base, path))):
                return command_name(command, line, path)
    return None


def _paths_named(body: str, error: str) -> list[tuple[str, str]]:
    """(line, path) of the paths the errors (lower case text) in a command's output name (up
    to 32)."""
    found: list[tuple[str, str]] = []
    if error not in body.lower():
        return found
    for line in body.splitlines():
        lower = line.lower()
        at = lower.find(error)
        while at != -1 and len(found) < 32:
            # Before it: ``touch: cannot touch 'x': Read-only``, ``bash: line 1: x: Read-only``.
            before = line[max(0, at - _WINDOW_CHARS) : at].rstrip()
            if before.endswith(":"):
                path = _last_word(before[:-1].rstrip())
                if path:
                    found.append((line, path))
            after = _PATH_AFTER.match(line, at + len(error), at + len(error) + _WINDOW_CHARS)
            if after is not None:
                found.append((line, next(group for group in after.groups() if group is not None)))
            at = lower.find(error, at + len(error))
    return [(line, path.rstrip(".,;")) for line, path in found]


def _last_word(text: str) -> str | None:
    """The quoted text or the word that ends text, or None."""
    if text[-1:] in ("'", '"'):
        opening = text.rfind(text[-1], 0, len(text) - 1)
        return text[opening + 1 : -1] if opening >= 0 else None
    words = text.split()
    return words[-1] if words else None


class RunRefusals:
    """Feed a thread's rollout entries in file order; read which of one run's calls were refused."""

    def __init__(self, since: datetime) -> None:
        """Count only entries stamped at or after since (the run's start)."""
        self.since = since
        self.policy: SandboxPolicy | None = None
        self.understood = False
        """True once a ``turn_context`` of this run was read and understood."""
        self.refused: list[str] = []
        self._calls: dict[str, dict[str, Any]] = {}

    @property
    def verdict(self) -> list[str] | None:
        """The refused commands' names; None when this run's sandbox is not known."""
        return list(self.refused) if self.understood else None

    def take(self, entry: object) -> None:
        """Read one rollout entry (a parsed line); anything else is ignored."""
        if not isinstance(entry, dict) or not isinstance(entry.get("timestamp"), str):
            return
        stamp = parse_iso(entry["timestamp"][:64])
        payload = entry.get("payload")
        if stamp is None or stamp < self.since or not isinstance(payload, dict):
            return
        if entry.get("type") == "turn_context":
            self.policy = policy_of(payload)
            self.understood = self.policy is not None
            return
        kind = payload.get("type")
        call_id = payload.get("call_id")
        if not isinstance(call_id, str):
            return
        if kind == "function_call" and payload.get("name") in SHELL_TOOLS:
            arguments = _arguments(payload.get("arguments"))
            if arguments is not None and len(self._calls) < MAX_PENDING_CALLS:
                self._calls[call_id] = arguments
        elif kind == "function_call_output":
            arguments = self._calls.pop(call_id, None)
            output = payload.get("output")
            if arguments is None or not isinstance(output, str) or self.policy is None:
                return
            name = refused_command(arguments, output, self.policy)
            if name is not None:
                outcomes.add_denial(self.refused, name)


def _arguments(raw: object) -> dict[str, Any] | None:
    """A function call's arguments (JSON text) as a dict, or None."""
    if not isinstance(raw, str) or len(raw) > MAX_OUTPUT_CHARS:
        return None
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
