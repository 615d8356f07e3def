# syntax=docker/dockerfile:1
# The Eight Off game server. Build: docker build -t eightoff .   Run: docker run -p 8765:8765 eightoff
# Without settings it runs one node on SQLite in /app; docker-compose.yml runs it on PostgreSQL + Redis.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Install the project (not editable) from a throwaway source copy.
WORKDIR /build
COPY pyproject.toml README.md ./
COPY engine ./engine
COPY solver ./solver
COPY protocol ./protocol
COPY server ./server
COPY migrations ./migrations
COPY web ./web
# The client library (client/, its own distribution too): the root pyproject installs it beside the server.
COPY client ./client
RUN pip install . && rm -rf /build

# Run as an unprivileged user; /app is its working directory (the default SQLite file lands here).
RUN useradd --system --uid 10001 --user-group --home-dir /app --create-home --shell /usr/sbin/nologin eightoff
WORKDIR /app
USER eightoff

EXPOSE 8765

# No curl in slim: probe /healthz with the standard library (EIGHTOFF_PORT if the operator changed it).
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, sys, urllib.request; port = os.environ.get('EIGHTOFF_PORT', '8765'); sys.exit(0 if urllib.request.urlopen(f'http://127.0.0.1:{port}/healthz', timeout=2).status == 200 else 1)"]

# The server handles SIGTERM itself (graceful shutdown within EIGHTOFF_SHUTDOWN_GRACE seconds).
STOPSIGNAL SIGTERM
CMD ["eightoff", "serve", "--host", "0.0.0.0"]
