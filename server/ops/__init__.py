"""Running the server: the command line (`server.ops.cli`), workers on one port under a supervisor
(`server.ops.workers`), logging and the event loop (`server.ops.runtime`), and the checks of what is
stored (`server.ops.verify`, `server.ops.records`)."""
