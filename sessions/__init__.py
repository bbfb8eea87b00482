"""What a session is and what we can know about it: models, parsers, pure evaluators."""
