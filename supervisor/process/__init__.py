"""Agent processes: launched into their own group, found again, stopped as a tree."""
