"""The people: the herd command line and the Textual dashboard, clients of the control API."""
