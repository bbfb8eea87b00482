"""Git for herd: facts read from .git, checkpoints, rescue commits, resets and scratch worktrees."""
