"""What an agent's own hook lines say (sessions/agentsignals.py), and how herd hands an
interactive agent its hooks (supervisor/session/inputwait.py): pure, no process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from agentherd.sessions import launchspec
from agentherd.sessions.agentsignals import (
    TERMINAL,
    TURN_ENDS,
    WAITS,
    WORKS,
    read_signal,
    read_signals,
)
from agentherd.sessions.config import parse_config
from agentherd.supervisor.session import inputwait


def line(event: str, **fields: str) -> str:
    return json.dumps({"hook_event_name": event, **fields})


def test_each_agents_hook_events_say_waits_or_works() -> None:
    for event in ("Stop", "AfterAgent", "PermissionRequest"):
        assert read_signal(line(event)).verdict == WAITS  # type: ignore[union-attr]
    question = read_signal(line("PermissionRequest", tool_name="AskUserQuestion"))
    assert question is not None and question.verdict == WAITS
    assert question.why == "a question waits for an answer"  # Claude Code's question tool
    asked = read_signal(line("PermissionRequest", tool_name="Bash", agent_type="general-purpose"))
    assert asked is not None and asked.verdict == WAITS
    assert asked.why == "a permission prompt of its general-purpose subagent waits for an answer"
    gemini_asks = json.dumps(
        {
            "hook_event_name": "Notification",
            "notification_type": "ToolPermission",
            "details": {"type": "ask_user", "title": "Ask User"},
        }
    )
    assert read_signal(gemini_asks).why == "a question waits for an answer"  # type: ignore[union-attr]
    for kind in ("permission_prompt", "idle_prompt", "elicitation_dialog", "ToolPermission"):
        found = read_signal(line("Notification", notification_type=kind))
        assert found is not None and found.verdict == WAITS
    for event in ("UserPromptSubmit", "BeforeAgent", "PreToolUse", "PostToolUse", "AfterTool"):
        assert read_signal(line(event)).verdict == WORKS  # type: ignore[union-attr]
    assert read_signal(line("Notification", notification_type="auth_success")) is None
    assert read_signal(line("SessionStart")) is None
    assert read_signal("not json") is None and read_signal("[1]") is None
    lines = "\n".join([line("UserPromptSubmit"), "garbage", "", line("Stop")])
    assert [s.event for s in read_signals(lines)] == ["UserPromptSubmit", "Stop"]


def test_two_hooks_appending_at_once_leave_two_objects_on_a_line_and_both_are_read() -> None:
    """Each hook writes its JSON, then its newline: a subagent's hook and its main thread's
    that ran at once leave `{..}{..}` and an empty line (seen with Codex 0.171.0)."""
    asks = line("PermissionRequest", tool_name="Bash", agent_id="a1", agent_type="default")
    both = f"{asks}{line('PreToolUse', tool_name='wait_agent')}\n\n{line('Stop')} garbage {{"
    found = read_signals(both)
    assert [(s.event, s.agent) for s in found] == [
        ("PermissionRequest", "a1"),
        ("PreToolUse", None),
        ("Stop", None),
    ]
    assert found[0].why == "a permission prompt of its default subagent waits for an answer"
    terminal = read_signal(line("TerminalState", state="blocked", kind="permission"))
    assert terminal is not None and terminal.agent == TERMINAL
    # What says the turn ended (no dialog of it still open), as the reader names it.
    idle = read_signal(line("Notification", notification_type="idle_prompt"))
    ends = [read_signal(line(event)) for event in ("Stop", "AfterAgent")]
    assert {s.event for s in [idle, *ends] if s is not None} == TURN_ENDS


def test_claude_gets_its_hooks_by_flag_from_a_file_under_herd_and_they_append(
    tmp_path: Path,
) -> None:
    toml = '[[session]]\nname = "c"\nagent = "claude"\ncommand = "claude --model x"\n'
    toml += "interactive = true\n"
    config = parse_config(toml, tmp_path / "herd.toml").sessions[0]
    run_folder = tmp_path / ".herd" / "runs" / "c" / "1"
    flags, env = inputwait.prepare(run_folder, config, {})
    settings = Path(flags[1])
    assert flags[0] == "--settings" and settings.parent == run_folder / "agent"
    signals = Path(env["HERD_SIGNALS"])
    assert signals == inputwait.signals_path(run_folder)
    # A one-string command runs through sh -c: the flags go at the end of its script.
    argv = launchspec.with_flags(config.argv(config.command), flags)
    assert argv[:2] == ["/bin/sh", "-c"] and argv[2].startswith("claude --model x --settings ")
    assert launchspec.with_flags(["claude"], flags) == ["claude", *flags]
    hooks = json.loads(settings.read_text())["hooks"]
    assert {"Stop", "PermissionRequest", "UserPromptSubmit"} <= set(hooks)
    command = hooks["Stop"][0]["hooks"][0]["command"]
    for event in ("Stop", "UserPromptSubmit"):
        subprocess.run(["sh", "-c", command], input=line(event), text=True, check=True)
    assert [s.event for s in read_signals(signals.read_text())] == ["Stop", "UserPromptSubmit"]


def config_of(tmp_path: Path, agent: str):  # type: ignore[no-untyped-def]
    toml = f'[[session]]\nname = "c"\nagent = "{agent}"\ncommand = "{agent}"\n'
    return parse_config(toml + "interactive = true\n", tmp_path / "herd.toml").sessions[0]


def test_codex_gets_a_home_under_herd_with_the_users_config_and_herds_trusted_hooks(
    tmp_path: Path,
) -> None:
    user = tmp_path / "user-codex"
    (user / "sessions").mkdir(parents=True)
    (user / "auth.json").write_text("{}")
    user_hooks = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "mine"}]}]}}
    (user / "hooks.json").write_text(json.dumps(user_hooks))
    (user / "config.toml").write_text(
        f'model = "m"\n[hooks.state."{user}/hooks.json:stop:0:0"]\ntrusted_hash = "sha256:x"\n'
    )
    run_folder = tmp_path / ".herd" / "runs" / "c" / "1"
    flags, env = inputwait.prepare(
        run_folder, config_of(tmp_path, "codex"), {"CODEX_HOME": str(user)}
    )
    home = Path(env["CODEX_HOME"])
    assert flags == [] and home.parent == run_folder / "agent"
    # Login and conversations stay the user's: the spend readers and a resume find them.
    assert (home / "auth.json").resolve() == user / "auth.json"
    assert (home / "sessions").resolve() == user / "sessions"
    hooks = json.loads((home / "hooks.json").read_text())["hooks"]
    assert hooks["Stop"][0]["hooks"][0]["command"] == "mine"  # the user's hook kept first
    command = hooks["Stop"][1]["hooks"][0]["command"]
    config = (home / "config.toml").read_text()
    assert config.startswith('model = "m"')
    assert f'[hooks.state."{home}/hooks.json:stop:0:0"]' in config  # still trusted, moved
    assert f'[hooks.state."{home}/hooks.json:stop:1:0"]' in config
    assert f'[hooks.state."{home}/hooks.json:permission_request:0:0"]' in config
    subprocess.run(["sh", "-c", command], input=line("Stop"), text=True, check=True)
    assert [s.event for s in read_signals(Path(env["HERD_SIGNALS"]).read_text())] == ["Stop"]
    assert json.loads((user / "hooks.json").read_text()) == user_hooks, "never written"


def test_gemini_gets_a_home_under_herd_with_the_users_settings_and_herds_hooks(
    tmp_path: Path,
) -> None:
    user = tmp_path / "user"
    (user / ".gemini").mkdir(parents=True)
    settings = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
    (user / ".gemini" / "settings.json").write_text("// mine\n" + json.dumps(settings))
    (user / ".gemini" / "oauth_creds.json").write_text("{}")
    run_folder = tmp_path / ".herd" / "runs" / "c" / "1"
    _, env = inputwait.prepare(run_folder, config_of(tmp_path, "gemini"), {"HOME": str(user)})
    gemini = Path(env["GEMINI_CLI_HOME"]) / ".gemini"
    written = json.loads((gemini / "settings.json").read_text())
    assert written["security"] == settings["security"]
    assert {"AfterAgent", "Notification", "BeforeAgent"} <= set(written["hooks"])
    assert (gemini / "oauth_creds.json").resolve() == user / ".gemini" / "oauth_creds.json"
    assert (gemini / "tmp").resolve() == user / ".gemini" / "tmp"  # its chats: the user's


def test_a_settings_file_that_is_no_json_object_leaves_the_agent_its_own_home(
    tmp_path: Path,
) -> None:
    user = tmp_path / "user"
    (user / ".gemini").mkdir(parents=True)
    (user / ".gemini" / "settings.json").write_text("{not json")
    run_folder = tmp_path / ".herd" / "runs" / "c" / "1"
    _, env = inputwait.prepare(run_folder, config_of(tmp_path, "gemini"), {"HOME": str(user)})
    assert "GEMINI_CLI_HOME" not in env and "HERD_SIGNALS" in env
    (user / ".gemini" / "settings.json").write_text('{"hooks": []}')
    _, env = inputwait.prepare(run_folder, config_of(tmp_path, "gemini"), {"HOME": str(user)})
    assert "GEMINI_CLI_HOME" not in env
