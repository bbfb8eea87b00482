"""The error a session command raises when it does not fit the session's state."""


class SessionError(Exception):
    """A command that does not fit the session's state; shown to the person as one line."""
