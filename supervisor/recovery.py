"""Restart from a checkpoint: rescue the dirty tree, reset the worktree, choose resume or not."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio

from agentherd.sessions.adapters import valid_session_id
from agentherd.sessions.config import SessionConfig
from agentherd.supervisor import gitops

if TYPE_CHECKING:
    from agentherd.supervisor.port import SessionPort

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
    if not await anyio.to_thread.run_sync(gitops.is_git_repo, cwd):
        if not session.git_warned and session.observer.git_error is None:
            session.mark_git_warned(
                session.make_event(
                    "not-a-git-repo",
                    f"{cwd} is not a git repository: restarting without rescue or reset",
                    last_run,
                )
            )
        return None if deadline.cancelled else (env_extra, resume_mode(session, last_run))
    ref = f"refs/herd/{run_config.name}/rescue/{last_run}"
    saved: gitops.SavedRef | None = None
    step = "rescue"
    try:
        saved = await anyio.to_thread.run_sync(
            gitops.save_rescue,
            cwd,
            ref,
            f"herd: rescue of run {last_run}",
            [session.ctx.config_path],
            deadline,
        )
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
        target_sha = await restart_target(session, target, run_config)
        if target_sha:
            deadline.renew()  # the reset gets a budget of its own: a slow rescue must not starve it
            kept = None
            if saved is None:  # a rescue commit's parent is HEAD: it keeps the commits already
                kept = await anyio.to_thread.run_sync(
                    gitops.keep_head,
                    cwd,
                    f"refs/herd/{run_config.name}/before-reset/{last_run}",
                    target_sha,
                    deadline,
                )
            await anyio.to_thread.run_sync(
                gitops.reset_worktree, cwd, target_sha, [session.ctx.config_path], deadline
            )
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


async def restart_target(
    session: SessionPort, target: str | None, run_config: SessionConfig
) -> str | None:
    """The commit to reset to: the last checkpoint, the last verified one, or a given one."""
    cwd = run_config.cwd
    wanted = target or run_config.restart_from
    if wanted == "verified":
        verified = session.ctx.store.last_verified(session.config.name)
        if verified is not None:
            return verified
        session.commit_events(
            session.make_event(
                "no-verified-checkpoint",
                "no verified checkpoint yet; restarting from the last checkpoint",
                session.record.run,
            )
        )
    if wanted in ("last", "verified"):
        return await anyio.to_thread.run_sync(gitops.head_sha, cwd)  # no diff stat needed
    return await anyio.to_thread.run_sync(gitops.resolve_commit, cwd, wanted)


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
