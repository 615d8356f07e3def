"""The browser client: static files served by the server at ``GET /`` (no Python runs here).

It is a package only so that an installed server finds its files (``importlib.resources``).
"""
