"""An interactive Codex or Gemini CLI run's own home under `.herd/`, holding herd's hooks.

Both CLIs read their hooks from a file in their home (`$CODEX_HOME/hooks.json`, Gemini CLI's
`~/.gemini/settings.json`); neither takes them by a flag, and Gemini CLI reads its system
settings file only when it and every folder above it is root's and writable by no one else
(its `isFileAndDirectorySecureSync`), never true under `.herd/`. So the run gets a home of its
own in its run folder (`CODEX_HOME`, `GEMINI_CLI_HOME`): the user's config copied with herd's
hooks added, every other entry of the user's home a symlink to it, so logins, history and the
conversation files the spend readers and a resume look for stay where they always are. The
user's own files are never written.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentherd.sessions.adapters.codex_rollout import codex_home
from agentherd.sessions.adapters.gemini_chats import gemini_dir
from agentherd.supervisor.files import private

CODEX_HOOKS = {
    "Stop": "stop",
    "PermissionRequest": "permission_request",
    "UserPromptSubmit": "user_prompt_submit",
    "PreToolUse": "pre_tool_use",
    "PostToolUse": "post_tool_use",
}
"""Codex's hook events herd listens to, and the snake-case names its trust keys use."""
GEMINI_HOOKS = ("AfterAgent", "Notification", "BeforeAgent", "BeforeTool", "AfterTool")
"""Gemini CLI's hook events herd listens to."""
CODEX_OWN = ("config.toml", "hooks.json")
GEMINI_OWN = ("settings.json",)
_LINE_COMMENT = re.compile(r"^\s*//.*$", re.MULTILINE)


def codex_hook_hash(event: str, command: str) -> str:
    """The `trusted_hash` Codex records for a trusted command hook: sha256 over the compact,
    key-sorted JSON of the hook's identity with Codex's defaults (timeout 600, not async)."""
    handler = {"async": False, "command": command, "timeout": 600, "type": "command"}
    identity = {"event_name": event, "hooks": [handler]}
    canonical = json.dumps(identity, separators=(",", ":"), sort_keys=True)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def _shadow(source: Path, shadow: Path, own: tuple[str, ...], shared: str) -> None:
    """Link every entry of `source` into `shadow` but the files herd writes; `shared` (where
    the conversations go) made first, so the agent writes them in the user's home."""
    (source / shared).mkdir(parents=True, exist_ok=True)
    for entry in source.iterdir():
        if entry.name not in own and not os.path.lexists(shadow / entry.name):
            os.symlink(entry, shadow / entry.name)


def _read_json(path: Path) -> dict[str, Any]:
    """A settings file as a dict ({} when missing); `//` comment lines allowed; ValueError
    when it is no JSON object, or its `hooks` no table."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    data = json.loads(_LINE_COMMENT.sub("", text) or "{}")
    if not isinstance(data, dict) or not isinstance(data.get("hooks", {}), dict):
        raise ValueError(f"{path}: not a JSON object with a `hooks` table")
    return data


def codex(folder: Path, env: Mapping[str, str], command: str) -> dict[str, str]:
    """A CODEX_HOME for the run in `folder` ({}: the user's own, when theirs cannot be read)."""
    try:
        return _codex(folder, env, command)
    except (OSError, ValueError):
        return {}  # the agent reads (and reports) its own file: only waiting-input is lost


def gemini(folder: Path, env: Mapping[str, str], command: str) -> dict[str, str]:
    """A GEMINI_CLI_HOME for the run in `folder` ({}: the user's own, when theirs cannot be
    read)."""
    try:
        return _gemini(folder, env, command)
    except (OSError, ValueError):
        return {}  # the agent reads (and reports) its own file: only waiting-input is lost


def _codex(folder: Path, env: Mapping[str, str], command: str) -> dict[str, str]:
    """A CODEX_HOME for the run in `folder`: the user's config with herd's hooks trusted."""
    source = codex_home(env)
    shadow = private.make_folder(folder / "codex-home")
    if source is None:
        return {"CODEX_HOME": str(shadow)}
    _shadow(source, shadow, CODEX_OWN, "sessions")
    hooks_file = shadow / "hooks.json"
    hooks = _read_json(source / "hooks.json")
    groups = hooks.setdefault("hooks", {})
    config = ""
    if (source / "config.toml").exists():
        # The user's trusted hooks stay trusted: their keys name the hooks file by its path.
        old = f'"{source / "hooks.json"}:'
        config = (source / "config.toml").read_text().replace(old, f'"{hooks_file}:')
    trust = []
    for event, snake in CODEX_HOOKS.items():
        found = groups.setdefault(event, [])
        trust.append(
            f'\n[hooks.state."{hooks_file}:{snake}:{len(found)}:0"]\n'
            f'trusted_hash = "{codex_hook_hash(snake, command)}"\n'
        )
        found.append({"hooks": [{"type": "command", "command": command}]})
    private.write_file(hooks_file, json.dumps(hooks))
    private.write_file(shadow / "config.toml", config + "\n" + "".join(trust))
    return {"CODEX_HOME": str(shadow)}


def _gemini(folder: Path, env: Mapping[str, str], command: str) -> dict[str, str]:
    """A GEMINI_CLI_HOME for the run in `folder`: the user's settings with herd's hooks."""
    home = private.make_folder(folder / "gemini-home")
    shadow = private.make_folder(home / ".gemini")
    source = gemini_dir(env)
    settings: dict[str, Any] = {}
    if source is not None:
        _shadow(source, shadow, GEMINI_OWN, "tmp")
        settings = _read_json(source / "settings.json")
    groups = settings.setdefault("hooks", {})
    for event in GEMINI_HOOKS:
        groups.setdefault(event, []).append({"hooks": [{"type": "command", "command": command}]})
    private.write_file(shadow / "settings.json", json.dumps(settings))
    return {"GEMINI_CLI_HOME": str(home)}
