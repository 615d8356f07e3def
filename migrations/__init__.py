"""Alembic migrations: the only way the schema is made.

Run them with `server.storage.db.upgrade_to_head` (the server does at start-up), or from the repository root
with ``alembic -x url=sqlite+aiosqlite:///path/to/eightoff.db upgrade head`` (config in ``pyproject.toml``).
New revision files are named ``YYYY-MM-DD-HHMM_slug.py``; each one has a ``downgrade()`` checked by hand.
"""
