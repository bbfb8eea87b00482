"""The work a simulated agent does: set the project up, then implement one feature at a time."""

from __future__ import annotations

from pathlib import Path

from agentherd.supervisor.sim.simfiles import (
    GITIGNORE,
    INIT_COMMIT,
    TODO_FEATURES,
    Item,
    append_progress,
    commit,
    feature_files,
    first_failing,
    load_plan,
    save_plan,
    status_line,
    title,
    write_file,
)
from agentherd.supervisor.sim.simstream import Action, Agent


def initialize(agent: Agent, count: int) -> None:
    """Act as the initializer: write plan, progress file and skeleton, then commit."""
    plan = [
        {
            "category": "style" if n % 4 == 0 else "functional",
            "description": f"Feature {n}: {TODO_FEATURES[(n - 1) % len(TODO_FEATURES)]}",
            "steps": [
                "Step 1: Open the app",
                f"Step 2: Exercise feature {n}",
                f"Step 3: Verify feature {n} works",
            ],
            "passes": False,
        }
        for n in range(1, count + 1)
    ]
    style = sum(1 for item in plan if item["category"] == "style")

    def setup() -> str:
        """Write the plan, the progress file, .gitignore and README."""
        save_plan(agent.plan_path, plan)
        Path(".gitignore").write_text(GITIGNORE, encoding="utf-8")
        Path("README.md").write_text("# todo-app\n\nBuilt by simagent.\n", encoding="utf-8")
        return f"Wrote {agent.plan_path} with {count} features"

    def first_commit() -> str:
        """Append the initializer's progress entry and make the first commit."""
        bullets = [
            f"- Created {agent.plan_path.name} with {count} features "
            f'({count - style} functional, {style} style), all "passes": false.',
            "- Set up the project structure: README.md, .gitignore, src/ and tests/.",
            f'- Commit: "{INIT_COMMIT}"',
            f"- Next: feature 1 ({plan[0]['description']})." if plan else "- Next: nothing.",
            status_line(plan),
        ]
        append_progress(agent.progress_path, "initializer", bullets)
        paths = [str(agent.plan_path), str(agent.progress_path), ".gitignore", "README.md"]
        return commit(paths, INIT_COMMIT)

    agent.work(
        1,
        f"Setting up the project: a feature list of {count} features.",
        [
            Action("Write", {"file_path": str(agent.plan_path)}, setup),
            Action("Bash", {"command": f"git commit -m '{INIT_COMMIT}'"}, first_commit),
        ],
    )
    agent.cost += agent.args.cost_per_feature


def implement(agent: Agent, n: int) -> None:
    """Implement feature ``n``: code, test, flip ``passes``, progress entry, commit."""
    plan = load_plan(agent.plan_path)
    text = title(plan[n - 1], n)
    files = feature_files(n, text)
    message = f"Implement {text} - verified"

    def finish() -> str:
        """Flip the feature to passing, write the progress entry and commit."""
        fresh = load_plan(agent.plan_path)
        fresh[n - 1]["passes"] = True
        save_plan(agent.plan_path, fresh)
        write_entry(agent, fresh, n, files, message)
        return commit([*files, str(agent.plan_path), str(agent.progress_path)], message)

    actions = [Action("Write", {"file_path": p}, write_file(p, c)) for p, c in files.items()]
    test_cmd = f"python -m pytest -q tests/test_feature_{n}.py"
    actions.append(Action("Bash", {"command": test_cmd}, lambda: "1 passed"))
    actions.append(Action("Bash", {"command": f"git commit -m '{message}'"}, finish))
    agent.work(n, f"Next failing feature is {n}: {text}. Implementing it.", actions)
    agent.cost += agent.args.cost_per_feature


def write_entry(
    agent: Agent, plan: list[Item], n: int, files: dict[str, str], message: str
) -> None:
    """Append the coding session's progress entry for feature ``n``."""
    previous = [k for k in range(1, n) if plan[k - 1].get("passes") is True]
    if previous:
        k = previous[-1]
        check = f"- Verification: re-ran feature {k} ({title(plan[k - 1], k)}); still passes."
    else:
        check = "- Verification: no passing features to re-check yet."
    following = first_failing(plan)
    if following is None:
        upcoming = "- Next: nothing left; all features pass."
    else:
        upcoming = f"- Next: feature {following} ({title(plan[following - 1], following)})."
    bullets = [
        *agent.notes,
        check,
        f"- Implemented feature {n} ({title(plan[n - 1], n)}); added {', '.join(files)}.",
        f"- Marked feature {n} as passing.",
        f'- Commit: "{message}"',
        upcoming,
        status_line(plan),
    ]
    agent.notes = []
    append_progress(agent.progress_path, "coding", bullets)
