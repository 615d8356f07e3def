"""Helpers shared by the test folders, in one place: servers and clients over real sockets
(``serverutil``, ``wsclient``, ``tcpproxy``), databases (``dbutil``, ``migrated_db``), positions and
wire frames (``positions``, ``wire``), a rule-free client board (``board``), stand-ins a room sees
(``rooms``) and waiting for a condition instead of sleeping (``waiting``)."""
