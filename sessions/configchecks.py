"""Problems only this machine can show in a valid herd.toml: folders, programs, shared
worktrees, cost limits no figure can reach, `manages` naming nothing, and what keeps it from
joining a cluster."""

from __future__ import annotations

import fnmatch
import importlib.util
import os
import shutil
from pathlib import Path

from agentherd.sessions.adapters import AGENTS, price_for
from agentherd.sessions.clusterconfig import POSTGRES_SCHEMES
from agentherd.sessions.configschema import HerdConfig
from agentherd.sessions.prices import price_table
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
        if isinstance(session.command, list):
            program = session.command[0]
            search_path = session.env.get("PATH", os.environ.get("PATH"))
            if "/" in program:
                candidate = session.cwd / program
                found = _is_file(candidate) and os.access(candidate, os.X_OK)
            else:
                found = shutil.which(program, path=search_path) is not None
            if not found:
                problems.append(
                    Problem(
                        file,
                        f"{program!r} is not on PATH; install it or give its full path",
                        session.name,
                        "command",
                    )
                )
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
        + cluster_problems(config)
    )


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
