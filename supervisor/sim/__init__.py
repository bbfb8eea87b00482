"""The simulated coding agent and the demo fleet built from it (`herd demo`)."""
