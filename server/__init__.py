"""The asyncio runtime of the Eight Off server: the only package that does I/O.

One action's way through it (docs/architecture.md draws it): `server.edge` (bytes, frames, a decoded
request) → `server.dispatch` (the request's checks and route) → `server.play` (a room's command and
its effects) → `server.storage` (the group commit) → back through the room's driver to the replies
and pushes. `server.services` holds what requests use besides rooms, `server.ops` how the server is
run, and `server.app` puts it all together.
"""

__version__ = "0.1.0"
