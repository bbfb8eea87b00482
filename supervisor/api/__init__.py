"""The control API: wire format, server, clients, operations, status feed, offline reader."""
