"""Work moves with the session: its checkpoints pushed to `[cluster] checkpoint_remote`, and
a host that is about to run a session another host ran resets its worktree to them first.

Remote refs, per session:
- `refs/herd/SESSION/last`: the session's last checkpoint, wherever it ran; it moves with the
  session. Each push names the value this host last saw there (`--force-with-lease`), so a
  fenced host's late push can never move it back under the host that took the session over.
- `refs/herd/SESSION/verified`: its last checkpoint that passed `verify`.
- `refs/herd/SESSION/hosts/HOST/rescue/RUN` and `.../before-reset/RUN`: a host's rescue refs
  (the dirty tree of a crashed run, untracked files included) and the commits a reset left
  behind. They are never moved.
- `refs/herd/SESSION/hosts/HOST/displaced/SHA12`: what `last` held when HOST, the session's
  owner, found it moved under its lease and pushed over it (`push_over`): a late push of a host
  that had lost the session (frozen in the middle of its push, its lease on `last` still good
  because the new owner had pushed nothing yet).

Every function is synchronous (git over the network): run them in a worker thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from agentherd.supervisor.git import gitops
from agentherd.supervisor.git.gitproc import GitDeadline, GitError

PUSH_TIMEOUT_S = 120.0
"""One push: a remote that does not answer in this long is a warning, and the next push tries."""
SYNC_TIMEOUT_S = 300.0
"""Fetch, rescue and reset before a moved session's run (a first fetch may be a whole clone)."""


def session_ref(session: str, kind: str) -> str:
    """The remote ref that moves with the session: `last` or `verified`."""
    return f"refs/herd/{session}/{kind}"


def host_ref(session: str, host: str, local_ref: str) -> str:
    """Where a host's own ref (`refs/herd/SESSION/rescue/RUN`...) goes on the remote."""
    prefix = f"refs/herd/{session}/"
    if not local_ref.startswith(prefix):
        raise ValueError(f"not a ref of session {session!r}: {local_ref!r}")
    return f"{prefix}hosts/{host}/{local_ref[len(prefix) :]}"


def _git(cwd: Path, *args: str, timeout_s: float = PUSH_TIMEOUT_S) -> bytes:
    """Run `git <args>` in `cwd`; its stdout, or GitError with git's own line."""
    result = gitops.run_git(cwd, *args, deadline=GitDeadline(timeout_s))
    if result.returncode != 0:
        raise GitError(f"git {args[0]} in {cwd}: {gitops.first_line(result.stderr)}")
    return result.stdout


def push(cwd: Path, remote: str, sha: str, dest: str, lease: str | None, timeout_s: float) -> None:
    """Push commit `sha` to `dest` on `remote`; GitError (one line) when refused or unreachable.

    With `lease` (the sha this host last saw at `dest`), the remote ref moves only if it still
    holds that value; without, only when it is new or `sha` descends from it.
    """
    force = [f"--force-with-lease={dest}:{lease}"] if lease else []
    _git(
        cwd, "push", "--quiet", "--no-verify", *force, remote, f"{sha}:{dest}", timeout_s=timeout_s
    )


def push_over(
    cwd: Path,
    remote: str,
    host: str,
    sha: str,
    dest: str,
    lease: str,
    still_owner: Callable[[], bool],
    timeout_s: float,
) -> str | None:
    """`push` for the session's owner: when `dest` moved away from `lease` meanwhile, and
    `still_owner()` (asked again then: this host may have been frozen in the push) says so, what
    `dest` holds is kept on a `displaced` ref of this host and `sha` pushed over it. The sha
    displaced, or None.

    Without it, one late push of the host that lost the session would refuse every push of its
    owner from then on: each names a lease the remote no longer holds.
    """
    try:
        push(cwd, remote, sha, dest, lease, timeout_s)
        return None
    except GitError:
        now = _fetch_ref(cwd, remote, dest, timeout_s)
        if now == lease or (now != sha and not still_owner()):
            raise  # it did not move (the push failed for another reason), or not ours to move
    if now == sha:
        return None
    session = dest.removeprefix("refs/herd/").partition("/")[0]
    kept = host_ref(session, host, f"refs/herd/{session}/displaced/{now[:12]}")
    push(cwd, remote, now, kept, None, timeout_s)
    push(cwd, remote, sha, dest, now, timeout_s)
    return now


def _fetch_ref(cwd: Path, remote: str, ref: str, timeout_s: float) -> str:
    """Fetch the herd ref `ref` of `remote` (to `.../remote/KIND`, as a sync does): its sha."""
    session, _, kind = ref.removeprefix("refs/herd/").partition("/")
    seen = f"refs/herd/{session}/remote/{kind}"
    _git(cwd, "fetch", "--quiet", "--no-tags", remote, f"+{ref}:{seen}", timeout_s=timeout_s)
    return _git(cwd, "rev-parse", "--verify", f"{seen}^{{commit}}").decode().strip()


def remote_heads(cwd: Path, remote: str, session: str, timeout_s: float) -> dict[str, str]:
    """The session's `last` and `verified` on the remote: {kind: sha} (empty: never pushed)."""
    wanted = {session_ref(session, kind): kind for kind in ("last", "verified")}
    listed = _git(cwd, "ls-remote", "--refs", remote, *wanted, timeout_s=timeout_s)
    found = {}
    for line in listed.decode("ascii", "replace").splitlines():
        sha, _, ref = line.partition("\t")
        if ref in wanted:
            found[wanted[ref]] = sha
    return found


@dataclass(frozen=True)
class Synced:
    """What a sync did: the commit the worktree now stands on and the remote's `last`."""

    sha: str
    last: str
    rescued: str | None
    kept: str | None
    created: bool


def _prepare_folder(cwd: Path, remote: str) -> bool:
    """Make sure `cwd` is a git worktree; True when it was created (empty or missing before)."""
    if gitops.is_git_repo(cwd):
        return False
    if cwd.exists() and any(cwd.iterdir()):
        raise GitError(f"{cwd} is not a git repository and not empty: not fetching {remote} there")
    if "://" not in remote and ":" not in remote and not remote.startswith("/"):
        raise GitError(
            f"{cwd} is empty and checkpoint_remote {remote!r} is a remote name it does not have; "
            "give a URL instead"
        )
    cwd.mkdir(parents=True, exist_ok=True)
    _git(cwd, "init", "--quiet")
    return True


def _holds(top: Path, sha: str) -> bool:
    """True when HEAD is `sha` or descends from it (this worktree has that work already)."""
    head = gitops.run_git(top, "rev-parse", "-q", "--verify", "HEAD^{commit}").stdout.strip()
    if not head or gitops.run_git(top, "cat-file", "-e", f"{sha}^{{commit}}").returncode != 0:
        return False
    return gitops.run_git(top, "merge-base", "--is-ancestor", sha, head.decode()).returncode == 0


def sync_worktree(
    cwd: Path,
    remote: str,
    session: str,
    restart_from: str,
    keep: Sequence[Path] = (),
    timeout_s: float = SYNC_TIMEOUT_S,
) -> Synced | None:
    """Bring the worktree to the session's last (or last verified) checkpoint on the remote.

    Nothing happens (None) when the remote has no checkpoint of the session, or when this
    worktree already holds the remote's `last` (this host ran the session last). Otherwise
    the folder is made a repository if it is empty, the refs are fetched, the dirty tree is
    rescued and HEAD kept on refs of their own, and the worktree is reset, as a restart does.
    """
    probe_dir = cwd if gitops.is_git_repo(cwd) else Path("/")
    heads = remote_heads(probe_dir, remote, session, timeout_s)
    last = heads.get("last")
    if last is None:
        return None
    created = _prepare_folder(cwd, remote)
    deadline = GitDeadline(timeout_s)
    top = gitops.git_paths(cwd).worktree
    if not created and _holds(top, last):
        return None
    specs = [f"+{session_ref(session, k)}:refs/herd/{session}/remote/{k}" for k in heads]
    _git(top, "fetch", "--quiet", "--no-tags", remote, *specs, timeout_s=timeout_s)
    target = heads["verified"] if restart_from == "verified" and "verified" in heads else last
    rescue = gitops.rescue(
        top,
        f"refs/herd/{session}/rescue/before-move",
        "herd: rescue before a move",
        keep,
        deadline,
        target,
    )
    rescued = rescue.saved
    kept = None
    if rescued is None:
        kept = gitops.keep_head(top, f"refs/herd/{session}/before-reset/before-move", target)
    gitops.reset_worktree(top, target, keep, deadline, rescue)
    return Synced(
        sha=target,
        last=last,
        rescued=rescued.ref if rescued else None,
        kept=kept.ref if kept else None,
        created=created,
    )
