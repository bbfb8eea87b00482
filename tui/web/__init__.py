"""`herd web`: the fleet in a browser, rendered on the server from the daemon's control API."""
