"""Maintainers' tools that are not shipped with the server (see pyproject.toml)."""
