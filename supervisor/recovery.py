"""Restart from a checkpoint: rescue the dirty tree, reset the worktree, choose resume or not."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio

from agentherd.sessions.agent_output import valid_session_id
from agentherd.supervisor import gitops

if TYPE_CHECKING:
    from agentherd.supervisor.session import SessionSupervisor

log = logging.getLogger("herd.recovery")


async def prepare_restart(
    session: SessionSupervisor, target: str | None, last_run: int
) -> tuple[dict[str, str], str]:
    """Rescue the dirty tree, reset to the restart target; say whether to resume."""
    env_extra: dict[str, str] = {}
    cwd = session.config.cwd
    if not await anyio.to_thread.run_sync(gitops.is_git_repo, cwd):
        if not session.git_warned and session.observer.git_error is None:
            session.git_warned = True
            session.commit_events(
                session.make_event(
                    "not-a-git-repo",
                    f"{cwd} is not a git repository: restarting without rescue or reset",
                    last_run,
                )
            )
        return env_extra, resume_mode(session, last_run)
    ref = f"refs/herd/{session.config.name}/rescue/{last_run}"
    try:
        rescue_sha = await anyio.to_thread.run_sync(
            gitops.save_rescue,
            cwd,
            ref,
            f"herd: rescue of run {last_run}",
            [session.ctx.config_path],
        )
        if rescue_sha:
            env_extra["HERD_RESCUE_REF"] = ref
            session.commit_events(
                session.make_event(
                    "rescue-saved",
                    f"uncommitted work saved on {ref}",
                    last_run,
                    ref=ref,
                    sha=rescue_sha,
                )
            )
        target_sha = await restart_target(session, target)
        if target_sha:
            await anyio.to_thread.run_sync(
                gitops.reset_worktree, cwd, target_sha, [session.ctx.config_path]
            )
            env_extra["HERD_CHECKPOINT"] = target_sha
            session.commit_events(
                session.make_event(
                    "worktree-reset",
                    f"worktree reset to {target_sha[:12]}",
                    last_run,
                    sha=target_sha,
                )
            )
    except Exception as exc:  # a git failure must not stop the restart itself
        log.exception("restart preparation failed for %s", session.config.name)
        session.commit_events(
            session.make_event("rescue-failed", f"could not rescue/reset: {exc}", last_run)
        )
    return env_extra, resume_mode(session, last_run)


async def restart_target(session: SessionSupervisor, target: str | None) -> str | None:
    """The commit to reset to: the last checkpoint, the last verified one, or a given one."""
    cwd = session.config.cwd
    wanted = target or session.config.restart_from
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
        checkpoint = await anyio.to_thread.run_sync(gitops.head_checkpoint, cwd)
        return checkpoint.sha if checkpoint else None
    return await anyio.to_thread.run_sync(gitops.resolve_commit, cwd, wanted)


def resume_mode(session: SessionSupervisor, last_run: int) -> str:
    """`resume` when the agent's session id is known and safe for argv, else `command`."""
    sid = session.record.agent_session_id
    if session.config.resume is None or not sid:
        return "command"
    if not valid_session_id(sid):
        session.commit_events(
            session.make_event(
                "resume-refused",
                f"session id {sid[:40]!r} does not look like one; running command instead",
                last_run,
            )
        )
        session.record.agent_session_id = None
        return "command"
    return "resume"
