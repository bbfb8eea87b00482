"""A throw-away workspace of simulated agents for `herd demo`: git repos, plans and a herd.toml."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

PLAN_FILE = "feature_list.json"
PROGRESS_FILE = "claude-progress.txt"
SIMAGENT = [sys.executable, "-m", "agentherd.supervisor.sim.simagent"]
GIT_IDENTITY = [
    "-c",
    "user.name=herd-demo",
    "-c",
    "user.email=demo@localhost",
    "-c",
    "commit.gpgsign=false",
]
DEMO_JITTER = 0.3
"""Each feature takes its delay +-30 %, so the fleet's rows do not move in lockstep."""


@dataclass(frozen=True)
class Behaviour:
    """One kind of simulated agent: what it works on, how it misbehaves, how herd restarts it."""

    name: str
    features: tuple[str, ...]
    agent_args: tuple[str, ...]
    toml_extra: tuple[str, ...] = ()
    verify: tuple[str, ...] = (sys.executable, "-m", "compileall", "-q", ".")
    """herd runs this against every new commit, in a scratch worktree of exactly that commit."""
    shows: str = ""
    """What this agent is set up to show, in a sentence for the dashboard."""


BEHAVIOURS: tuple[Behaviour, ...] = (
    Behaviour(
        "api-migration",
        (
            "List endpoints return cursor pagination",
            "Create endpoint validates the payload",
            "Errors use the RFC 7807 problem format",
            "Old /v1 routes redirect to /v2",
            "Rate limit headers are sent on every response",
            "OpenAPI schema lists every route",
            "Deprecated fields are removed from responses",
            "Health check reports the DB version",
            "Request ids are logged with every line",
            "Integration tests cover the v2 routes",
        ),
        ("--delay", "12"),
        shows="steady: a feature every ~12s, each commit verified (✓)",
    ),
    Behaviour(
        "auth-refactor",
        (
            "Passwords are hashed with argon2",
            "Sessions expire after 30 minutes idle",
            "Login is rate limited per account",
            "Password reset tokens are single use",
            "TOTP can be enabled in settings",
            "Logout revokes the refresh token",
            "Audit log records every login",
        ),
        ("--delay", "11", "--crash-at", "3", "--crash-once"),
        ('restart_delay = "2s"',),
        shows="crashes once mid-edit: herd rescues the edit, restarts it (RST 1) and it goes on",
    ),
    Behaviour(
        "search-index",
        (
            "Documents are indexed on save",
            "Search matches word prefixes",
            "Results are ranked by recency and score",
            "Deleted documents leave the index",
            "Search highlights the matched words",
            "Index rebuild runs in the background",
        ),
        ("--delay", "5", "--stall-at", "2", "--stall-once"),
        ('budget = { stall = "30s" }', 'on_drift = { stalled = "restart" }'),
        shows="stalls after feature 2: silent for 30s, herd raises a stall warning (⚠) and "
        "on_drift restarts it from its last verified checkpoint",
    ),
    Behaviour(
        "billing-export",
        (
            "Invoices export to CSV",
            "Exports include tax lines",
            "Amounts use the account currency",
            "Export runs for a date range",
            "Large exports stream instead of buffering",
            "Exports are emailed when done",
            "Failed exports can be retried",
            "Export history is kept for 90 days",
        ),
        ("--delay", "20", "--flood", "2"),
        verify=(
            sys.executable,
            "-c",
            "import sys; print('3 failed: tax lines missing'); sys.exit(1)",
        ),
        shows="floods output; verification fails on every commit (✗): Checkpoints shows why",
    ),
    Behaviour(
        "docs-site",
        (
            "Landing page lists the guides",
            "Guides render code blocks with highlighting",
            "Search box finds guide titles",
            "Every page has an edit-on-GitHub link",
            "API reference is generated from docstrings",
            "Dark mode follows the system setting",
            "Broken links fail the build",
            "Sitemap is generated",
        ),
        ("--delay", "6", "--one-per-run"),
        ('restart = "until-done"', 'restart_delay = "1s"'),
        shows="one feature per run: herd restarts it until the plan passes (restart = until-done)",
    ),
    Behaviour(
        "mobile-sync",
        (
            "Changes made offline sync on reconnect",
            "Conflicts keep the newest edit",
            "Sync shows progress in the status bar",
            "Attachments sync over Wi-Fi only",
            "Sync retries with backoff",
            "Deleted items sync as tombstones",
            "Sync can be paused in settings",
            "Sync log can be exported",
        ),
        ("--delay", "12", "--tamper-at", "3"),
        ('on_drift = { plan-tampered = "pause" }',),
        shows="tampers with its plan at feature 3: on_drift holds it for you (waiting-approval); "
        "A approves the change, X rejects it, and the run goes on",
    ),
)


def _git(repo: Path, *args: str) -> None:
    """Run git in `repo`; raise with git's own message when it fails."""
    result = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} in {repo} failed: {result.stderr.strip()}")


def _plan(behaviour: Behaviour) -> list[dict[str, object]]:
    """The feature list in the long-running-harness shape, every item failing."""
    return [
        {
            "category": "functional",
            "description": description,
            "steps": [
                "Step 1: Set up the scenario",
                f"Step 2: {description}",
                "Step 3: Verify the result",
            ],
            "passes": False,
        }
        for description in behaviour.features
    ]


def _progress(behaviour: Behaviour) -> str:
    """The initializer's entry in the progress file, as the long-running harness writes it."""
    count = len(behaviour.features)
    return (
        f"# {PROGRESS_FILE} — {behaviour.name}\n\n"
        f"## Session 1 (initializer) — {time.strftime('%Y-%m-%d')}\n"
        f'- Created {PLAN_FILE} with {count} features, all "passes": false.\n'
        f"- Next: feature 1 ({behaviour.features[0]}).\n"
        f"- Status: 0/{count} tests passing\n"
    )


def _make_repo(folder: Path, behaviour: Behaviour) -> None:
    """A small git repo with a plan, a progress file and one initial commit."""
    folder.mkdir(parents=True)
    (folder / PLAN_FILE).write_text(json.dumps(_plan(behaviour), indent=2) + "\n")
    (folder / PROGRESS_FILE).write_text(_progress(behaviour))
    (folder / "README.md").write_text(f"# {behaviour.name}\n\nA herd demo project.\n")
    (folder / ".gitignore").write_text("__pycache__/\n*.pyc\n.herd/\n")
    _git(folder, "init", "-q", "-b", "main")
    _git(folder, "add", "--", PLAN_FILE, PROGRESS_FILE, "README.md", ".gitignore")
    _git(
        folder,
        *GIT_IDENTITY,
        "commit",
        "-q",
        "--no-verify",
        "-m",
        "Initial setup: feature_list.json and project structure",
    )


DEMO_BUDGET_USD = 2.0
"""Each demo session's cost budget: the busiest (a feature a run, restarted) nears it in a few
minutes, so the Spend tab shows a limit, a warning and where the spend is heading."""


def _toml_list(values: list[str]) -> str:
    """A TOML array of strings (JSON string escapes are valid TOML basic strings)."""
    return "[" + ", ".join(json.dumps(value) for value in values) + "]"


def _session_block(name: str, behaviour: Behaviour) -> str:
    """One [[session]] block running the simulated agent with this behaviour."""
    files = ["--plan", PLAN_FILE, "--progress", PROGRESS_FILE]
    args = [*files, *behaviour.agent_args, "--jitter", str(DEMO_JITTER)]
    lines = [
        "[[session]]",
        f'name     = "{name}"',
        f'cwd      = "{name}"',
        'agent    = "claude"',
        f"command  = {_toml_list([*SIMAGENT, *args])}",
        f"resume   = {_toml_list([*SIMAGENT, *args, '--resume', '{session_id}'])}",
        f'plan     = "{PLAN_FILE}"',
        f'progress = "{PROGRESS_FILE}"',
        f"verify   = {_toml_list(list(behaviour.verify))}",
        *behaviour.toml_extra,
    ]
    return "\n".join(lines) + "\n"


def demo_names(sessions: int) -> list[tuple[str, Behaviour]]:
    """Session names and behaviours: the six behaviours in turn, numbered after the first round."""
    named = []
    for index in range(sessions):
        behaviour = BEHAVIOURS[index % len(BEHAVIOURS)]
        round_number = index // len(BEHAVIOURS) + 1
        name = behaviour.name if round_number == 1 else f"{behaviour.name}-{round_number}"
        named.append((name, behaviour))
    return named


def demo_notes(sessions: int) -> dict[str, str]:
    """What each demo session's agent is set up to show, by session name."""
    return {name: behaviour.shows for name, behaviour in demo_names(sessions)}


def create_demo(root: Path, sessions: int = 6) -> Path:
    """Create repos and a herd.toml of `sessions` simulated agents under `root`; return its path."""
    if sessions < 1:
        raise ValueError("a demo needs at least one session")
    root.mkdir(parents=True, exist_ok=True)
    config_path = root / "herd.toml"
    if config_path.exists():
        raise FileExistsError(f"{config_path} already exists; use an empty folder for the demo")
    blocks = []
    for name, behaviour in demo_names(sessions):
        _make_repo(root / name, behaviour)
        blocks.append(_session_block(name, behaviour))
    header = (
        "# herd demo: simulated coding agents (agentherd.supervisor.sim.simagent),"
        " a git repo each:\n"
        "# steady, crashes once mid-edit, stalls once (restarted), slow, one feature per run,"
        " tampers its plan.\n"
        '\n[defaults]\nrestart = "on-failure"\nstop_grace = "3s"\n'
        f"budget = {{ cost_usd = {DEMO_BUDGET_USD}, warn_at = 0.75 }}"
        "  # the Spend tab charts each session against it\n\n"
    )
    config_path.write_text(header + "\n".join(blocks))
    return config_path
