"""Problems only this machine can show in a valid herd.toml: folders, programs, shared
worktrees, cost limits no figure can reach, `manages` naming nothing, and what keeps it from
joining a cluster."""

from __future__ import annotations

import fnmatch
import importlib.util
import os
import resource
import shlex
import shutil
from pathlib import Path

from agentherd.sessions.adapters import AGENTS, price_for
from agentherd.sessions.clusterconfig import POSTGRES_SCHEMES
from agentherd.sessions.configschema import HerdConfig, SessionConfig
from agentherd.sessions.prices import lookup, price_table, table_header
from agentherd.sessions.problems import Problem


def _worktree_root(folder: Path) -> Path | None:
    """The git worktree folder containing `folder` (where `.git` is), found without running git."""
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def _folder_problem(folder: Path) -> str | None:
    """Why `folder` cannot be a session's cwd, or None when it can."""
    try:
        if folder.is_dir():
            return None
    except OSError as exc:  # a name too long, a permission denied on the way
        return f"{folder}: {exc.strerror or exc}; fix the path"
    return f"{folder} does not exist; create it or fix the path"


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def _program_problem(
    session: SessionConfig, argv: list[str] | str | None, field: str
) -> tuple[str, bool] | None:
    """Why the program of `argv` cannot run here (and whether that is only a warning), or
    None. A text command runs through sh -c: sh is always there. A path in the worktree of a
    verify program may be one the agent writes (a warning); a command's must exist now."""
    if not isinstance(argv, list) or not argv:
        return None
    program = argv[0]
    if "/" in program:
        candidate = session.cwd / program
        if _is_file(candidate) and os.access(candidate, os.X_OK):
            return None
        if field == "command":
            return f"{program!r} is not on PATH; install it or give its full path", False
        return f"{program!r} is not an executable file yet; the agent may write it", True
    search_path = session.env.get("PATH", os.environ.get("PATH"))
    if shutil.which(program, path=search_path) is not None:
        return None
    return f"{program!r} is not on PATH; install it or give its full path", False


FDS_PER_SESSION = 3
"""Open files a running session holds in the daemon: its run's pidfd and output log (2 at rest,
bench/scale.py counts them) and a pipe of a git or verify process while one runs."""
FDS_OF_THE_DAEMON = 512
"""The daemon's own open files beside its sessions': 256 clients at once (the API's
MAX_CONNECTIONS), the store, the watcher, its log, room for git."""


def open_files_needed(sessions: int) -> int:
    """How many open files the daemon of a fleet of `sessions` sessions may need at once."""
    return FDS_OF_THE_DAEMON + FDS_PER_SESSION * sessions


def open_files_problems(config: HerdConfig, hard_limit: int | None = None) -> list[Problem]:
    """A fleet the daemon cannot hold open within this machine's hard open-file limit."""
    if hard_limit is None:
        hard_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    needed = open_files_needed(len(config.sessions))
    if hard_limit == resource.RLIM_INFINITY or needed <= hard_limit:
        return []
    return [
        Problem(
            config.path.name,
            f"{len(config.sessions)} sessions need up to {needed:,} open files in the daemon "
            f"({FDS_PER_SESSION} a session, {FDS_OF_THE_DAEMON} its own) but this machine's hard "
            f"limit is {hard_limit:,}: raise it (`ulimit -Hn` as root, `LimitNOFILE=` in a "
            "systemd unit) or split the fleet; sessions past it fail to start",
            warning=True,
        )
    ]


def environment_problems(config: HerdConfig) -> list[Problem]:
    """Problems only the machine can show: missing folders, programs not on PATH, shared trees."""
    file = config.path.name
    problems: list[Problem] = []
    roots: dict[Path, str] = {}
    for session in config.sessions:
        cwd_problem = _folder_problem(session.cwd)
        if cwd_problem:
            problems.append(Problem(file, cwd_problem, session.name, "cwd"))
            continue
        for field, argv in (
            ("command", session.command),
            ("verify_setup", session.verify_setup),
            ("verify", session.verify),
        ):
            problem = _program_problem(session, argv, field)
            if problem is not None:
                problems.append(Problem(file, problem[0], session.name, field, warning=problem[1]))
        root = _worktree_root(session.cwd)
        if root is not None:
            if root in roots:
                problems.append(
                    Problem(
                        file,
                        f'shares the git worktree {root} with session "{roots[root]}"; a crash '
                        "restart of one resets the tree under the other (use `git worktree add`)",
                        session.name,
                        "cwd",
                        warning=True,
                    )
                )
            else:
                roots[root] = session.name
    return (
        problems
        + manages_problems(config)
        + cost_budget_problems(config)
        + fleet_turns_problems(config)
        + unpriced_model_problems(config)
        + cluster_problems(config)
        + cluster_after_problems(config)
        + notifications_problems(config)
        + open_files_problems(config)
    )


def notifications_problems(config: HerdConfig) -> list[Problem]:
    """Warnings for `urls_env` variables unset here: a daemon started from here sends nothing
    through them (each message that cannot go is a `notification-failed` event)."""
    table = config.notifications
    if table is None:
        return []
    return [
        Problem(
            config.path.name,
            f"{name} is not set here; export it (an Apprise URL, like ntfys://ntfy.sh/TOPIC) "
            "where the daemon starts",
            None,
            "notifications.urls_env",
            warning=True,
        )
        for name in table.urls_env
        if not os.environ.get(name)
    ]


def cluster_after_problems(config: HerdConfig) -> list[Problem]:
    """Warnings for `after` across hosts: the engine places tasks without following chains."""
    if config.cluster is None:
        return []
    return [
        Problem(
            config.path.name,
            "is not followed across hosts yet: the cluster may start this session before "
            f"{', '.join(session.after)} completed; run the chain without [cluster], or start "
            "each link yourself",
            session.name,
            "after",
            warning=True,
        )
        for session in config.sessions
        if session.after
    ]


def manages_problems(config: HerdConfig) -> list[Problem]:
    """Warnings for `manages` entries that name no session of the file: they grant nothing."""
    names = [s.name for s in config.sessions]
    return [
        Problem(
            config.path.name,
            f"{pattern!r} names no session in this file, so it grants nothing; "
            "fix the name or remove it",
            session.name,
            "manages",
            warning=True,
        )
        for session in config.sessions
        for pattern in session.manages
        if not any(fnmatch.fnmatchcase(name, pattern) for name in names)
    ]


def cost_budget_problems(config: HerdConfig) -> list[Problem]:
    """Warnings for a cost budget herd cannot enforce: the agent reports no cost, has no price."""
    file = config.path.name
    table = price_table(config.prices)
    blind = [
        s
        for s in config.sessions
        if not AGENTS[s.agent].reports_cost and price_for(s.agent, s.price, table) is None
    ]
    problems = [
        Problem(
            file,
            f"agent {s.agent!r} may report no cost and has no price, so this limit may never "
            "act; "
            'name one with price = "MODEL" (see [prices]) or use tokens',
            s.name,
            "budget.cost_usd",
            warning=True,
        )
        for s in blind
        if s.budget.cost_usd is not None
    ]
    if config.fleet.budget.cost_usd is not None and blind:
        names = ", ".join(s.name for s in blind)
        problems.append(
            Problem(
                file,
                f"the fleet's cost leaves out {names} (no cost reported, no price); "
                'give them price = "MODEL"',
                None,
                "fleet.budget.cost_usd",
                warning=True,
            )
        )
    return problems


def fleet_turns_problems(config: HerdConfig) -> list[Problem]:
    """A warning for a fleet `turns` limit over sessions whose turns herd cannot count (a
    session's own such limit is refused when the file is read)."""
    blind = [s.name for s in config.sessions if not AGENTS[s.agent].counts_turns]
    if config.fleet.budget.turns is None or not blind:
        return []
    return [
        Problem(
            config.path.name,
            f"the fleet's turns count one a run for {', '.join(blind)} (herd cannot count "
            "their turns); limit tokens or cost_usd instead",
            None,
            "fleet.budget.turns",
            warning=True,
        )
    ]


MODEL_FLAGS: dict[str, tuple[str, ...]] = {
    "claude": ("--model",),
    "gemini": ("--model", "-m"),
    "codex": ("--model", "-m"),
    "aider": ("--model",),  # its -m is --message
}
"""How each agent whose cost herd prices by its model is told the model on its command line."""

MODEL_ENV: dict[str, str] = {"claude": "ANTHROPIC_MODEL", "gemini": "GEMINI_MODEL"}
"""The environment variable each agent takes its model from."""


def named_model(agent: str, command: list[str] | str, env: dict[str, str]) -> str | None:
    """The model a session's command line (or environment) tells its agent to use, or None."""
    flags = MODEL_FLAGS.get(agent, ())
    words = command
    if isinstance(command, str):
        try:
            words = shlex.split(command)
        except ValueError:  # unbalanced quotes: words as they stand
            words = command.split()
    found = None
    for index, word in enumerate(words):
        for flag in flags:
            if word == flag and index + 1 < len(words):
                found = words[index + 1]
            elif word.startswith(flag + "="):
                found = word.removeprefix(flag + "=")
    variable = MODEL_ENV.get(agent)
    return found or (env.get(variable) if variable else None) or None


def unpriced_model_problems(config: HerdConfig) -> list[Problem]:
    """Warnings for a session whose agent is told a model herd has no price for."""
    table = price_table(config.prices)
    problems = []
    for session in config.sessions:
        model = named_model(session.agent, session.command, session.env)
        if model is None or session.price is not None or lookup(model, table) is not None:
            continue
        problems.append(
            Problem(
                config.path.name,
                f"herd has no price for model {model!r}, so its cost will show unpriced and a "
                f"cost budget cannot count it; add {table_header(model)} with input_usd_per_mtok "
                'and output_usd_per_mtok, or name one with price = "MODEL"',
                session.name,
                "command",
                warning=True,
            )
        )
    return problems


def cluster_problems(config: HerdConfig) -> list[Problem]:
    """What keeps this machine from joining the cluster herd.toml names, one line each."""
    file = config.path.name
    cluster = config.cluster
    if cluster is None:
        return [
            Problem(file, "runs on a host of a cluster; add a [cluster] table", s.name, "host")
            for s in config.sessions
            if s.host is not None
        ]
    field = "cluster.database_url_env"
    name = cluster.database_url_env
    url = cluster.database_url()
    if url is None:
        return [
            Problem(
                file,
                f"${name} is not set; export it with the PostgreSQL URL, like "
                f"export {name}=postgresql://USER:PASSWORD@HOST:5432/herd",
                field=field,
            )
        ]
    if not url.startswith(POSTGRES_SCHEMES):
        return [
            Problem(
                file,
                f"${name} does not hold a PostgreSQL URL (it should begin with postgresql://)",
                field=field,
            )
        ]
    if importlib.util.find_spec("dbos") is None:
        return [
            Problem(
                file,
                "the cluster needs the cluster extra: pip install 'agentherd[cluster]'",
                field="cluster",
            )
        ]
    return []
