"""The Textual dashboard: the fleet view, the session screen, their feeds and widgets."""
