"""Finding the real agent CLIs and giving each test a throw-away home for them.

`.ci/run` installs pinned versions into `.cache/agents` (AGENT_BIN_DIR). A developer without
them gets a skip that says how to install them; with CI=true a missing binary fails the test.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import threading
import tomllib
from pathlib import Path
from typing import Any

import pytest
from conftest import Herd, git, make_repo, wait_until
from model_servers import ScriptedServer, Tokens

from agentherd.sessions import prices
from agentherd.sessions.adapters import price_for
from agentherd.sessions.adapters.usage import Usage
from agentherd.tui.cli.templates import init_text

ROOT = Path(__file__).resolve().parent.parent
AGENT_BIN_DIR = Path(
    os.environ.get("HERD_AGENTS_BIN") or ROOT / ".cache" / "agents" / "node_modules" / ".bin"
)
"""Where .ci/run installs the CLIs (HERD_AGENTS_BIN points elsewhere); then PATH is searched."""

PINNED = {
    "claude": "@anthropic-ai/claude-code@2.1.197",
    "codex": "@openai/codex@0.171.0",
    "gemini": "@google/gemini-cli@0.61.0",
    "opencode": "opencode-ai@1.18.33",
}
"""The versions these tests were written against (.ci/run installs the same)."""

AGENT_WAIT_S = 90.0
"""The real CLI starts in a second or two; a loaded CI machine gets plenty more."""

MAIN = "main"
"""The one session each real-agent test runs."""


def agent_binary(name: str) -> str:
    """The path of the `name` CLI: .cache/agents first, then PATH; skip or fail when absent."""
    search = f"{AGENT_BIN_DIR}{os.pathsep}{os.environ.get('PATH', '')}"
    found = shutil.which(name, path=search)
    if found:
        return found
    message = (
        f"the real `{name}` CLI is not installed: run .ci/run, or "
        f"`npm install --prefix .cache/agents {PINNED[name]}`"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(message + " (CI=true: a missing agent fails the run)", pytrace=False)
    pytest.skip(message)


@pytest.fixture
def claude() -> str:
    return agent_binary("claude")


@pytest.fixture
def codex() -> str:
    return agent_binary("codex")


@pytest.fixture
def gemini() -> str:
    return agent_binary("gemini")


@pytest.fixture
def opencode() -> str:
    return agent_binary("opencode")


def repo_with_identity(path: Path) -> Path:
    """A repo with a git identity of its own (Gemini's and OpenCode's shells saw none in HOME)."""
    repo = make_repo(path)
    git(repo, "config", "user.name", "agent")
    git(repo, "config", "user.email", "agent@example.invalid")
    return repo


def start_main(herd: Herd, toml: str) -> None:
    """Serve `toml` from a real daemon and start its session `main`."""
    herd.write(toml)
    herd.start()
    herd.client.call("start", name=MAIN)


def ended(herd: Herd, timeout_s: float = AGENT_WAIT_S) -> dict[str, Any]:
    """The status of `main` once its task completed or failed."""
    return herd.wait_state(MAIN, "completed", "failed", timeout_s=timeout_s)


def completed(herd: Herd, timeout_s: float = AGENT_WAIT_S) -> dict[str, Any]:
    """The status of `main` once its task ended, which must be completed."""
    status = ended(herd, timeout_s)
    assert status["state"] == "completed", (status, herd.events(MAIN))
    return status


def kill_mid_run(
    herd: Herd,
    hanging: threading.Event,
    draft: Path,
    session_id: bool = False,
    kept: tuple[Path, str, bytes] | None = None,
) -> str | None:
    """SIGKILL the agent while the model server holds its second request, after its first
    edit (`draft`) is on disk; with `session_id`, first wait for the agent's conversation id;
    with `kept` (home, file glob, bytes), for the agent to have written its first answer there.

    An agent writes its own files on its own schedule (Claude Code queues transcript writes):
    a kill before that loses the answer, and herd's estimate stands in for the true figure.
    """
    wait_until(hanging.is_set, AGENT_WAIT_S, "the agent's second request to hang")
    assert draft.exists()
    found = None
    if session_id:
        found = wait_until(lambda: herd.status(MAIN)["agent_session_id"], what="the id")
    if kept is not None:
        home, pattern, needle = kept
        wait_until(
            lambda: any(needle in path.read_bytes() for path in home.rglob(pattern)),
            what=f"the agent's first answer in its {pattern} under {home}",
        )
    os.kill(herd.status(MAIN)["pid"], signal.SIGKILL)
    return found


def rescued_and_resumed(herd: Herd, draft: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """After a kill: the task completed, the edit was saved and reset away, and the second run
    resumed the first; the final status and the `run-started` events."""
    status = completed(herd)
    assert herd.events(MAIN, "rescue-saved") and herd.events(MAIN, "worktree-reset")
    assert not draft.exists()  # saved on the rescue ref, then reset
    started = herd.events(MAIN, "run-started")
    assert [e["data"]["mode"] for e in started] == ["command", "resume"]
    # The resumed agent named the stored conversation and appends to its own record of it.
    (checked,) = herd.events(MAIN, "resume-checked")
    assert checked["data"]["agent_session_id"] == status["agent_session_id"]
    assert checked["data"]["file"] and Path(checked["data"]["file"]).is_file()
    assert not herd.events(MAIN, "resume-mismatch")
    return status, started


def resumed_without_reset(herd: Herd) -> list[dict[str, Any]]:
    """After a rate limit: the task completed, nothing was rescued or reset, and the second run
    resumed the first; the `run-started` events."""
    completed(herd)
    assert not herd.events(MAIN, "rescue-saved")
    assert not herd.events(MAIN, "worktree-reset")
    started = herd.events(MAIN, "run-started")
    assert [e["data"]["mode"] for e in started] == ["command", "resume"]
    return started


def assert_hello_committed(repo: Path) -> None:
    """The scripted work of the plain runs: hello.txt written and committed by the agent."""
    assert (repo / "hello.txt").read_text() == "hi\n"
    assert git(repo, "log", "-1", "--format=%s").strip() == "agent: add hello.txt"


def assert_cost_estimated(agent: str, usage: dict[str, Any]) -> None:
    """An agent that reports no cost: herd's price table estimates it and says so (never 0)."""
    price = price_for(agent, None, prices.price_table({}))
    expected = prices.with_estimate(Usage.from_json(usage), price)
    assert usage["cost_estimated"] is True
    assert usage["cost_usd"] == pytest.approx(expected.cost_usd) and usage["cost_usd"] > 0


def assert_cost_unpriced(herd: Herd, usage: dict[str, Any], models: set[str]) -> None:
    """A run on models herd has no price for: no cost at all (never another model's price),
    the model named in status, a `cost-unpriced` warning once per model, and the words that say
    so. A run on two models (Gemini's router and its answerer) may be told of both: the live
    reader can see the one before the run's last line names the other."""
    assert usage["cost_usd"] is None and usage["cost_estimated"] is False, usage
    model = usage["cost_unpriced_model"]
    assert model in models, (model, models)

    def of_model() -> list[dict[str, Any]]:
        return [e for e in herd.events(MAIN, "cost-unpriced") if e["data"]["model"] == model]

    said = wait_until(of_model, timeout_s=10)
    named = [e["data"]["model"] for e in herd.events(MAIN, "cost-unpriced")]
    assert len(said) == 1 and len(named) == len(set(named)) and set(named) <= models, named
    header = f'[prices."{model}"]' if "." in model else f"[prices.{model}]"  # TOML quoting
    assert header in said[0]["message"]
    hint = f"no price for {model}: add {header} to herd.toml"
    assert hint in herd.cli("status", MAIN).stdout
    assert "unpriced" in herd.cli("ls").stdout
    assert header in herd.cli("report", MAIN).stdout


def assert_in_flight_said(herd: Herd, server: ScriptedServer, status: dict[str, Any]) -> None:
    """The killed run's held request was begun and never finished, so no figure of it exists
    anywhere: herd counts none of it, and says so in its run, status and report."""
    assert server.hanging.is_set()  # the hold: an answer begun, never finished nor billed
    runs = herd.daemon.store.runs(MAIN)
    assert [r.usage["uncounted_requests"] for r in runs] == [1, 0]
    assert status["usage"]["uncounted_requests"] == 1
    words = "1 request cut off by a kill is not counted"
    assert words in herd.cli("status", MAIN).stdout
    assert words in herd.cli("report", MAIN).stdout


def preset(agent: str) -> dict[str, Any]:
    """The session block `herd init --agent AGENT` writes, as TOML data."""
    return dict(tomllib.loads(init_text(agent))["session"][0])


def claude_env(home: Path, base_url: str, binary: str) -> dict[str, str]:
    """What Claude Code needs offline against a local server, quiet and with short retries."""
    home.mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").write_text("[user]\n\tname = agent\n\temail = agent@example.invalid\n")
    return {
        "HOME": str(home),
        "PATH": f"{Path(binary).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-test-offline",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",
    }


def session_toml(name: str, agent: str, cwd: Path, env: dict[str, str], **keys: Any) -> str:
    """A herd.toml with one session: the agent's preset, this env, and extra keys."""
    block = preset(agent)
    block.pop("plan", None)
    block.pop("progress", None)
    block.update(name=name, cwd=str(cwd), autostart=False, restart_delay="0s", **keys)
    block["env"] = {**block.get("env", {}), **env}
    lines = ["[[session]]"]
    for key, value in block.items():
        if isinstance(value, dict):  # env, budget, on_drift, drift: inline tables
            inner = ", ".join(f"{k} = {json.dumps(v)}" for k, v in value.items())
            lines.append(f"{key} = {{ {inner} }}")
        else:
            lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"


def result_lines(log: Path) -> list[dict[str, Any]]:
    """The `result` lines a Claude run printed (its own account of tokens and cost)."""
    found = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("type") == "result":
            found.append(obj)
    return found


def codex_env(home: Path, base_url: str, binary: str) -> dict[str, str]:
    """A throw-away HOME and CODEX_HOME whose config points Codex at a local Responses API."""
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").write_text("[user]\n\tname = agent\n\temail = agent@example.invalid\n")
    (codex_home / "config.toml").write_text(
        'model = "gpt-5.1-codex"\n'
        'model_provider = "local"\n'
        "[model_providers.local]\n"
        'name = "local"\n'
        f'base_url = "{base_url}/v1"\n'
        'wire_api = "responses"\n'
        'env_key = "LOCAL_MODEL_KEY"\n'
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n"
    )
    return {
        "HOME": str(home),
        "CODEX_HOME": str(codex_home),
        "LOCAL_MODEL_KEY": "sk-test-offline",
        "PATH": f"{Path(binary).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def gemini_env(
    home: Path, base_url: str, binary: str, settings: dict[str, Any] | None = None
) -> dict[str, str]:
    """A throw-away HOME whose settings select API-key auth, pointed at a local Gemini API.

    settings: more of Gemini CLI's settings.json (e.g. ``{"general": {"maxAttempts": 1}}``).
    """
    folder = home / ".gemini"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "settings.json").write_text(
        json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}, **(settings or {})})
    )
    return {
        "HOME": str(home),
        "GOOGLE_GEMINI_BASE_URL": base_url,
        "GEMINI_API_KEY": "test-offline",
        "PATH": f"{Path(binary).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def opencode_env(
    home: Path, base_url: str, binary: str, permission: dict[str, str] | None = None
) -> dict[str, str]:
    """A throw-away HOME whose OpenCode config names one model on a local chat-completions API
    (and, given `permission`, OpenCode's documented permission settings)."""
    folder = home / ".config" / "opencode"
    folder.mkdir(parents=True, exist_ok=True)
    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "name": "local",
        "options": {"baseURL": f"{base_url}/v1", "apiKey": "sk-test-offline"},
        "models": {"test-model": {"name": "test-model"}},
    }
    config = {
        "provider": {"local": provider},
        "model": "local/test-model",
        "autoupdate": False,
        "share": "disabled",
    }
    if permission is not None:
        config["permission"] = permission
    (folder / "opencode.json").write_text(json.dumps(config))
    return {
        "HOME": str(home),
        "OPENCODE_DISABLE_MODELS_FETCH": "true",  # offline: no model list from the web
        "OPENCODE_DISABLE_AUTOUPDATE": "true",
        "PATH": f"{Path(binary).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def served_as_read(tokens: Tokens, cached_in_input: bool) -> tuple[int, int, int, int]:
    """(input, output, cache read, cache write) as herd reads an answer the server billed.

    Codex, Gemini and OpenCode report cached tokens inside the input and no cache writes; herd
    counts the cached part as cache read only.
    """
    if cached_in_input:
        return (tokens.input - tokens.cache_read, tokens.output, tokens.cache_read, 0)
    return (tokens.input, tokens.output, tokens.cache_read, tokens.cache_write)


def run_usages(herd: Any, name: str, count: int) -> list[tuple[int, int, int, int]]:
    """(input, output, cache read, cache write) of a session's first `count` runs, once ended."""

    def ended() -> list[tuple[int, int, int, int]] | None:
        done = [r for r in herd.daemon.store.runs(name) if r.ended_at is not None]
        if len(done) < count:
            return None
        return [
            (
                r.usage["input_tokens"],
                r.usage["output_tokens"],
                r.usage["cache_read_tokens"],
                r.usage["cache_write_tokens"],
            )
            for r in done[:count]
        ]

    return wait_until(ended, timeout_s=30, what=f"{count} ended runs of {name}")  # type: ignore[no-any-return]


def _signal_command(signals: Path) -> str:
    """A hook command that appends the JSON the agent gives on stdin as one line of `signals`."""
    return f"cat >> '{signals}'; echo >> '{signals}'"


def codex_hook_hash(event: str, command: str) -> str:
    """The `trusted_hash` Codex records for a trusted command hook: sha256 over the compact,
    key-sorted JSON of the hook's identity with Codex's defaults (timeout 600, not async)."""
    handler = {"async": False, "command": command, "timeout": 600, "type": "command"}
    identity = {"event_name": event, "hooks": [handler]}
    canonical = json.dumps(identity, separators=(",", ":"), sort_keys=True)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def interactive_env(
    cli: str, home: Path, cwd: Path, base_url: str, binary: str, signals: Path
) -> tuple[list[str], dict[str, str]]:
    """(argv, env) that start `cli`'s full-screen interface offline in `cwd` against a scripted
    server, every first-run dialog answered ahead, and its waits-for-a-person signal appended
    to `signals` one JSON object a line (docs/agents-interactive.md says what each is)."""
    hook = {"hooks": [{"type": "command", "command": _signal_command(signals)}]}
    if cli == "claude":
        env = claude_env(home, base_url, binary)
        key = env["ANTHROPIC_API_KEY"]
        # Onboarding done, this folder trusted, the key in the environment approved (by its
        # last 20 characters, as Claude Code records a person's yes).
        state = {
            "hasCompletedOnboarding": True,
            "customApiKeyResponses": {"approved": [key[-20:]], "rejected": []},
            "projects": {str(cwd): {"hasTrustDialogAccepted": True}},
        }
        (home / ".claude.json").write_text(json.dumps(state))
        settings = home / "herd-hooks.json"
        events = ("Notification", "PermissionRequest", "Stop")
        settings.write_text(json.dumps({"hooks": {event: [hook] for event in events}}))
        return [binary, "--settings", str(settings)], env
    if cli == "codex":
        env = codex_env(home, base_url, binary)
        codex_home = home / ".codex"
        events = {"PermissionRequest": "permission_request", "Stop": "stop"}
        hooks_file = codex_home / "hooks.json"
        hooks_file.write_text(json.dumps({"hooks": {event: [hook] for event in events}}))
        with (codex_home / "config.toml").open("a") as config:
            config.write(f'[projects."{cwd}"]\ntrust_level = "trusted"\n')
            # Each hook trusted ahead, as its "Hooks need review" dialog would record it.
            for snake in events.values():
                key = f"{hooks_file}:{snake}:0:0"
                digest = codex_hook_hash(snake, _signal_command(signals))
                config.write(f'[hooks.state."{key}"]\ntrusted_hash = "{digest}"\n')
        # --no-daemon: else the interface starts a background app-server that outlives it.
        return [binary, "--no-daemon"], env
    if cli == "gemini":
        hooks = {"hooks": {"Notification": [hook], "AfterAgent": [hook]}}
        env = gemini_env(home, base_url, binary, hooks)
        env["GEMINI_CLI_TRUST_WORKSPACE"] = "true"
        return [binary], env
    raise ValueError(f"no interactive recipe for {cli!r}")


def interactive_session(
    cli: str,
    binary: str,
    repo: Path,
    url: str,
    home: Path,
    *flags: str,
    config: str = "",
    restart: str = "never",
) -> tuple[str, dict[str, str]]:
    """herd.toml text and the session's environment: `cli`'s full-screen interface on `repo`
    as the interactive session MAIN (not started), against the scripted server at `url`, every
    first-run dialog answered ahead in the throw-away `home`; `config` is more of Codex's
    config.toml. herd passes its own hooks (supervisor/session/agenthomes.py)."""
    if cli == "claude":
        _, env = interactive_env("claude", home, repo, url, binary, home / "unused-signals")
        command = [binary, *flags]
    elif cli == "codex":
        env = codex_env(home, url, binary)
        with (Path(env["CODEX_HOME"]) / "config.toml").open("a") as toml:
            toml.write(f'{config}[projects."{repo}"]\ntrust_level = "trusted"\n')
        # --no-daemon: else the interface starts a background app-server that outlives it.
        command = [binary, "--no-daemon", *flags]
    elif cli == "gemini":
        # The folder trusted, and `CI` unset: else it asks to trust it, or runs non-interactive.
        env = gemini_env(home, url, binary)
        env |= {"GEMINI_CLI_TRUST_WORKSPACE": "true", "CI": "false"}
        command = [binary, *flags]
    else:
        raise ValueError(f"no interactive recipe for {cli!r}")
    keys = {"command": command, "interactive": True, "restart": restart, "stop_grace": "5s"}
    return session_toml(MAIN, cli, repo, env, **keys), env
