"""The `herd` command line: the fast paths, the verbs, and printing logs and statuses."""
