"""Files herd reads and keeps: agent files read safely, logs tailed and capped, the SQLite store."""
