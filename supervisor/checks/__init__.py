"""Where a session really stands: its files observed, checkpoints verified, report gathered."""
