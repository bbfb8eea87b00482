"""The commented herd.toml that `herd init` writes, with a session block per agent preset."""

from __future__ import annotations

CLAUDE_TOOLS = "Bash,Read,Edit,Write,Glob,Grep"
"""What the claude preset allows without asking: edit files and run any shell command."""

_WORK = (
    "Read claude-progress.txt and feature_list.json, then implement the next failing feature, "
    "run the tests, commit, and update the progress file."
)
_CONTINUE = (
    "Continue where you stopped. If herd restarted you after a crash, it saved your uncommitted "
    "edits on {rescue_ref} and reset the tree to {checkpoint} ('none' where it did not)."
)

_PRESETS: dict[str, tuple[str, str]] = {
    # Headless runs cannot ask for permission: each preset grants what editing, testing and
    # committing need (README: agents), with the prompt before the variadic --allowedTools.
    "claude": (
        f'["claude", "-p", "{_WORK}", "--output-format", "stream-json", "--verbose", '
        f'"--allowedTools", "{CLAUDE_TOOLS}"]',
        f'["claude", "-p", "{_CONTINUE}", "--resume", "{{session_id}}", "--output-format", '
        f'"stream-json", "--verbose", "--allowedTools", "{CLAUDE_TOOLS}"]',
    ),
    # workspace-write leaves .git read-only (no commit): the session's worktree is the sandbox.
    "codex": (
        f'["codex", "exec", "--json", "--sandbox", "danger-full-access", "{_WORK}"]',
        '["codex", "exec", "--json", "--sandbox", "danger-full-access", "resume", '
        f'"{{session_id}}", "{_CONTINUE}"]',
    ),
    "gemini": (
        f'["gemini", "-p", "{_WORK}", "--output-format", "stream-json", "--yolo"]',
        f'["gemini", "--resume", "{{session_id}}", "-p", "{_CONTINUE}", "--output-format", '
        '"stream-json", "--yolo"]',
    ),
    "amp": (
        '["amp", "-x", "Implement the next failing feature in feature_list.json.", '
        '"--stream-json"]',
        '["amp", "threads", "continue", "{session_id}", "-x", "Continue.", "--stream-json"]',
    ),
    "opencode": (
        f'["opencode", "run", "--format", "json", "{_WORK}"]',
        f'["opencode", "run", "--format", "json", "--session", "{{session_id}}", "{_CONTINUE}"]',
    ),
    "aider": (
        '["aider", "--yes-always", "--message", "Implement the next failing feature in '
        'feature_list.json."]',
        "",
    ),
    "plain": ('["./run-agent.sh"]', ""),
}


_ENV = {
    # Without it Gemini CLI exits 55 in a folder it was never told to trust.
    "gemini": 'env      = { GEMINI_CLI_TRUST_WORKSPACE = "true" }\n',
}


def session_block(agent: str, name: str = "main") -> str:
    """A [[session]] block for `agent`, commented, ready to paste."""
    if agent not in _PRESETS:
        raise KeyError(f"unknown agent {agent!r}; choose one of {', '.join(_PRESETS)}")
    command, resume = _PRESETS[agent]
    env_line = _ENV.get(agent, "")
    resume_line = (
        f"resume   = {resume}\n"
        if resume
        else (
            "# resume = [...]                  # how to continue after a crash; {session_id} etc.\n"
        )
    )
    return (
        "[[session]]\n"
        f'name     = "{name}"                 # letters, digits, - and _\n'
        'cwd      = "."                    # the git worktree the agent works in\n'
        f'agent    = "{agent}"\n'
        f"command  = {command}\n"
        f"{resume_line}"
        f"{env_line}"
        'plan     = "feature_list.json"    # JSON feature list; items may only flip to passing\n'
        'progress = "claude-progress.txt"  # the agent\'s progress notes\n'
        '# verify = "pytest -q"            # run by herd against each new checkpoint\n'
        '# scope  = ["src/**", "tests/**"] # commits outside these paths raise a warning\n'
        "autostart = true                  # started by `herd up`\n"
        '# budget = { tokens = 8_000_000, cost_usd = 25, stall = "20m" }\n'
    )


def init_text(agent: str) -> str:
    """The whole commented herd.toml."""
    return (
        "# herd.toml: the agents herd supervises. Check it with `herd check`.\n"
        "# Durations: 90s, 20m, 6h, 1h30m or seconds. Paths are relative to this file.\n\n"
        "[defaults]                          # applies to every session below\n"
        'restart = "on-failure"              # never | on-failure | always | until-done\n'
        'restart_from = "last"               # last | verified checkpoint after a crash\n'
        'restart_delay = "1s"                # first backoff; doubles up to restart_delay_max\n'
        'rate_limit_wait = "60s"             # after a rate limit with no reset time; doubles\n'
        "max_crashes = 5                     # this many within crash_window -> failed\n"
        'crash_window = "10m"\n'
        'stop_grace = "10s"                  # after the stop signal, then SIGKILL\n'
        'budget = { wall_time = "6h", warn_at = 0.8 }\n\n' + session_block(agent)
    )
