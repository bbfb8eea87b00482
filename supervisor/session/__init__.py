"""One session's supervisor and what it owns: launching, following, adoption, drift, budgets."""
