"""Restart from a checkpoint: rescue the dirty tree, reset the worktree, choose resume or not."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from agentherd.sessions.adapters import valid_session_id
from agentherd.sessions.config import SessionConfig
from agentherd.supervisor.git import gitops
from agentherd.supervisor.session import plankeep

if TYPE_CHECKING:
    from agentherd.supervisor.checks.port import SessionPort

log = logging.getLogger("herd.recovery")


async def prepare_restart(
    session: SessionPort,
    target: str | None,
    last_run: int,
    run_config: SessionConfig,
    deadline: gitops.GitDeadline,
) -> tuple[dict[str, str], str] | None:
    """Rescue the dirty tree, reset to the restart target; say whether to resume.

    `run_config` is the configuration the ended run was launched with: its worktree is the
    one rescued and reset, whatever herd.toml says now. The work runs under `deadline`,
    which a stop cancels; then it returns None (nothing is launched). What it did is posted
    to the session as events; it writes nothing itself.
    """
    env_extra: dict[str, str] = {}
    cwd = run_config.cwd
    ref = f"refs/herd/{run_config.name}/rescue/{last_run}"
    exclude = [session.ctx.config_path]
    saved: gitops.SavedRef | None = None
    step = "rescue"
    try:
        wanted = target_rev(session, target, run_config)
        ended = session.ctx.store.run(run_config.name, last_run)
        repo = (ended.git_dir, ended.git_dir_id) if ended is not None else (None, None)
        # One worker call for the look and the rescue, one for the target and the reset: on a
        # busy loop each hop to a worker and back was milliseconds of a crash's relaunch.
        is_repo, rescued = await anyio.to_thread.run_sync(
            _rescue, cwd, ref, f"herd: rescue of run {last_run}", exclude, deadline, wanted, repo
        )
        saved = rescued.saved if rescued is not None else None
        if not is_repo:
            if not session.git_warned and session.observer.git_error is None:
                session.mark_git_warned(
                    session.make_event(
                        "not-a-git-repo",
                        f"{cwd} is not a git repository: restarting without rescue or reset",
                        last_run,
                    )
                )
            return None if deadline.cancelled else (env_extra, resume_mode(session, last_run))
        if saved:
            env_extra["HERD_RESCUE_REF"] = saved.ref
            also = f" (earlier rescues of run {last_run}: {', '.join(saved.earlier)})"
            session.commit_events(
                session.make_event(
                    "rescue-saved",
                    f"uncommitted work saved on {saved.ref}" + (also if saved.earlier else ""),
                    last_run,
                    ref=saved.ref,
                    sha=saved.sha,
                    earlier=list(saved.earlier),
                )
            )
        step = "reset"
        keep_ref = None if saved else f"refs/herd/{run_config.name}/before-reset/{last_run}"
        plan = plankeep.PlanKeep.of(run_config, session.record.plan_baseline_raw)
        async with session.observer.plan_reads():
            target_sha, kept, plan_kept = await anyio.to_thread.run_sync(
                _reset, cwd, wanted, keep_ref, exclude, deadline, plan, rescued, repo
            )
        if target_sha:
            env_extra["HERD_CHECKPOINT"] = target_sha
            kept_note = f"; the commits after it are kept on {kept.ref}" if kept else ""
            session.commit_events(
                session.make_event(
                    "worktree-reset",
                    f"worktree reset to {target_sha[:12]}{kept_note}",
                    last_run,
                    sha=target_sha,
                    kept_ref=kept.ref if kept else None,
                    kept_sha=kept.sha if kept else None,
                )
            )
        if plan_kept and plan is not None:
            session.commit_events(plan.event(session, last_run, target_sha))
        session.close_warning("rescue-failed", "the worktree was saved and reset", "rescue")
    except gitops.GitCancelled:
        where = (
            "before the rescue finished; the worktree is untouched"
            if step == "rescue"
            else "during the reset; the worktree may be partly reset"
            + (f" (the agent's work is on {saved.ref})" if saved else "")
        )
        session.commit_events(
            session.make_event("restart-cancelled", f"stopped {where}", last_run, step=step)
        )
        return None
    except Exception as exc:  # a git failure must not stop the restart itself
        log.exception("restart preparation failed for %s", run_config.name)
        left = "; the worktree was not reset" if step == "rescue" else ""
        session.commit_events(
            session.make_event(
                "rescue-failed", f"could not {step}: {exc}{left}", last_run, step=step
            )
        )
    if deadline.cancelled:
        return None
    return env_extra, resume_mode(session, last_run)


def _rescue(
    cwd: Path,
    ref: str,
    message: str,
    exclude: list[Path],
    deadline: gitops.GitDeadline,
    wanted: tuple[str, str],
    repo: tuple[str | None, str | None] = (None, None),
) -> tuple[bool, gitops.Rescued | None]:
    """(is a git worktree, the rescue of everything a reset to `wanted` would remove), in the
    repository `repo` (git folder, its id) its task began in and no other."""
    gitops.check_identity(cwd, *repo)
    if not gitops.is_git_repo(cwd):
        return False, None
    kind, rev = wanted
    target = rev if kind != HEAD else None  # a revision the reset resolves; checked there
    return True, gitops.rescue(cwd, ref, message, exclude, deadline, target)


HEAD, VERIFIED, REVISION = "head", "verified", "revision"
"""What `target_rev` names: HEAD's commit (read in the worker that resets), the last verified
checkpoint's sha, or a revision to resolve."""


def _reset(
    cwd: Path,
    wanted: tuple[str, str],
    keep_ref: str | None,
    exclude: list[Path],
    deadline: gitops.GitDeadline,
    plan: plankeep.PlanKeep | None = None,
    rescued: gitops.Rescued | None = None,
    repo: tuple[str | None, str | None] = (None, None),
) -> tuple[str | None, gitops.SavedRef | None, bool]:
    """Reset the worktree to `wanted`: (the commit reset to, or None before the first commit;
    HEAD's commits kept on `keep_ref` when given and they would be lost; whether the plan was
    written back to its baseline after the reset)."""
    gitops.check_identity(cwd, *repo)
    kind, rev = wanted
    if kind == HEAD:
        target_sha = gitops.head_sha(cwd)  # no diff stat needed
    else:  # the store's verified sha as it is; any other revision named by its commit
        target_sha = rev if kind == VERIFIED else gitops.resolve_commit(cwd, rev)
    if not target_sha:
        return None, None, False
    deadline.renew()  # the reset gets a budget of its own: a slow rescue must not starve it
    kept = gitops.keep_head(cwd, keep_ref, target_sha, deadline) if keep_ref else None
    before = plan.read() if plan is not None else None
    gitops.reset_worktree(cwd, target_sha, exclude, deadline, rescued)
    # Right after the reset, in the same worker; the caller holds the plan reads meanwhile.
    return target_sha, kept, plan is not None and plan.keep(before)


def target_rev(
    session: SessionPort, target: str | None, run_config: SessionConfig
) -> tuple[str, str]:
    """The commit to reset to: the last checkpoint, the last verified one, or a given one."""
    wanted = target or run_config.restart_from
    if wanted == "verified":
        verified = session.ctx.store.last_verified(session.config.name)
        if verified is not None:
            return VERIFIED, verified
        session.commit_events(
            session.make_event(
                "no-verified-checkpoint",
                "no verified checkpoint yet; restarting from the last checkpoint",
                session.record.run,
            )
        )
    if wanted in ("last", "verified"):
        return HEAD, ""
    return REVISION, wanted


def resume_mode(session: SessionPort, last_run: int) -> str:
    """`resume` when the agent's session id is known and safe for argv, else `command`."""
    sid = session.record.agent_session_id
    if session.config.resume is None or not sid:
        return "command"
    if not valid_session_id(sid):
        session.forget_agent_session_id(
            session.make_event(
                "resume-refused",
                f"session id {sid[:40]!r} does not look like one; running command instead",
                last_run,
            )
        )
        return "command"
    return "resume"
