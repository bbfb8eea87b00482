"""Making it happen: the daemon, processes, files, git, the store and the control API."""
