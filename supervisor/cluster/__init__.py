"""One fleet across hosts on DBOS Transact and PostgreSQL (the `[cluster]` extra)."""
