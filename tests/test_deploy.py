"""The deployment files (Dockerfile, docker-compose.yml, deploy/haproxy.cfg, deploy/nftables-guard.nft)
agree with the code.

No Docker engine is needed: the files are parsed and checked against the real CLI parser and `Settings`.
`docker compose config -q` and `haproxy -c` run only where those tools are installed; `nft -c` (root)
in CI, and elsewhere where it can.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import http.server
import ipaddress
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy.engine import make_url

from server.config import Settings, settings_from_args
from server.ops.cli import build_parser
from tests.support.ci import unavailable

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
HAPROXY_CFG = ROOT / "deploy" / "haproxy.cfg"
HAPROXY_CFG_IN_CONTAINER = "/usr/local/etc/haproxy/haproxy.cfg"
NFTABLES_GUARD = ROOT / "deploy" / "nftables-guard.nft"

SETTINGS_FIELDS = {setting.name for setting in dataclasses.fields(Settings)}
DEFAULT_PORT = Settings().port


# ---------------------------------------------------------------- helpers


def _compose() -> dict[str, Any]:
    document = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert isinstance(document, dict), "docker-compose.yml is not a mapping"
    return document


def _services() -> dict[str, dict[str, Any]]:
    services = _compose().get("services")
    assert isinstance(services, dict) and services, "docker-compose.yml has no services"
    return services


def _environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment as a mapping, from either the mapping or the list form."""
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        pairs = (item.split("=", 1) if "=" in item else (item, "") for item in raw)
        return {key: value for key, value in pairs}
    return {str(key): "" if value is None else str(value) for key, value in raw.items()}


def _argv(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return shlex.split(value) if isinstance(value, str) else [str(part) for part in value]


def _dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, line continuations joined, comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        pending += stripped
        keyword, _, rest = pending.partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
        pending = ""
    return instructions


def _dockerfile(keyword: str) -> list[str]:
    return [rest for name, rest in _dockerfile_instructions() if name == keyword]


def _dockerfile_cmd() -> list[str]:
    commands = _dockerfile("CMD")
    assert commands, "the Dockerfile has no CMD"
    cmd = json.loads(commands[-1])  # exec form, so SIGTERM reaches the server itself
    assert isinstance(cmd, list), "CMD must be in exec (JSON) form"
    return [str(part) for part in cmd]


def _service_argv(service: dict[str, Any]) -> list[str]:
    """What a service runs: entrypoint + command, falling back to the image's CMD for the app image."""
    command = _argv(service.get("command"))
    entrypoint = _argv(service.get("entrypoint"))
    if not command and not entrypoint and _is_app_service(service):
        command = _dockerfile_cmd()
    return entrypoint + command


def _is_app_service(service: dict[str, Any]) -> bool:
    return "build" in service or service.get("image") == _app_image()


def _app_image() -> str | None:
    for service in _services().values():
        if "build" in service:
            return service.get("image")
    return None


def _parse_cli(argv: list[str]) -> Any:
    assert argv and Path(argv[0]).name == "eightoff", f"not an eightoff command: {argv}"
    try:
        return build_parser().parse_args(argv[1:])
    except SystemExit as exc:  # argparse reports a bad command line by exiting
        pytest.fail(f"`{shlex.join(argv)}` is not a valid eightoff command line (exit {exc.code})")


def _eightoff_services() -> dict[str, list[str]]:
    return {
        name: argv
        for name, service in _services().items()
        if (argv := _service_argv(service)) and "eightoff" in Path(argv[0]).name
    }


def _server_services() -> dict[str, dict[str, Any]]:
    services = _services()
    return {name: services[name] for name, argv in _eightoff_services().items() if argv[1:2] == ["serve"]}


def _effective_settings(service: dict[str, Any]) -> Settings:
    """The Settings a service's server would run with: its flags, then its environment."""
    args = _parse_cli(_service_argv(service))
    return settings_from_args(args, environ=_environment(service))


def _depends_on(service: dict[str, Any]) -> dict[str, str]:
    """depends_on as {service: condition}, from either the list or the mapping form."""
    raw = service.get("depends_on") or {}
    if isinstance(raw, list):
        return {name: "service_started" for name in raw}
    return {name: (spec or {}).get("condition", "service_started") for name, spec in raw.items()}


def _haproxy_lines() -> list[list[str]]:
    lines = []
    for line in HAPROXY_CFG.read_text(encoding="utf-8").splitlines():
        words = line.split("#", 1)[0].split()
        if words:
            lines.append(words)
    return lines


def _haproxy_servers() -> dict[str, tuple[str, int]]:
    """`server NAME HOST:PORT ...` lines as {NAME: (HOST, PORT)}."""
    servers = {}
    for words in _haproxy_lines():
        if words[0] == "server":
            host, _, port = words[2].rpartition(":")
            servers[words[1]] = (host, int(port))
    return servers


def _compose_database_urls() -> dict[str, str]:
    return {
        name: env["EIGHTOFF_DATABASE_URL"]
        for name, service in _services().items()
        if "EIGHTOFF_DATABASE_URL" in (env := _environment(service))
    }


def _compose_variables() -> list[str]:
    return sorted(
        {
            key
            for service in _services().values()
            for key in _environment(service)
            if key.startswith("EIGHTOFF_")
        }
    )


# ---------------------------------------------------------------- docker-compose.yml


def test_compose_file_is_yaml_with_the_expected_services() -> None:
    document = _compose()
    assert "version" not in document, "the compose spec has no `version:` key (it is obsolete)"
    services = _services()
    for name in ("postgres", "redis", "migrate", "lb"):
        assert name in services, f"docker-compose.yml lacks the {name} service"
    assert len(_server_services()) >= 2, "docker-compose.yml must run two or more server replicas"
    assert services["postgres"]["image"].startswith("postgres:16")
    assert services["redis"]["image"].startswith("redis:7")
    assert services["lb"]["image"].startswith("haproxy:")


def test_compose_eightoff_commands_parse_with_the_cli() -> None:
    commands = _eightoff_services()
    assert commands["migrate"][1:3] == ["db", "upgrade"], "migrate must run `eightoff db upgrade`"
    for name, argv in commands.items():
        args = _parse_cli(argv)
        assert callable(args.handler), name


@pytest.mark.parametrize("variable", _compose_variables())
def test_compose_variable_is_a_settings_field(variable: str) -> None:
    field_name = variable.removeprefix("EIGHTOFF_").lower()
    if variable == "EIGHTOFF_REDIS_URL" and field_name not in SETTINGS_FIELDS:
        pytest.xfail("server.config.Settings has no field `redis_url` yet (EIGHTOFF_REDIS_URL, --redis-url)")
    assert field_name in SETTINGS_FIELDS, f"{variable} names no field of server.config.Settings"


def test_compose_servers_have_distinct_nodes_and_listen_on_all_interfaces() -> None:
    nodes = {}
    for name, service in _server_services().items():
        assert "EIGHTOFF_NODE" in _environment(service), f"{name} sets no EIGHTOFF_NODE"
        settings = _effective_settings(service)
        assert settings.host == "0.0.0.0", f"{name} must listen on 0.0.0.0 inside its container"
        nodes[name] = settings.node
    assert len(set(nodes.values())) == len(nodes), f"server nodes share a name: {nodes}"


def test_compose_database_url_is_asyncpg_and_matches_postgres() -> None:
    postgres_env = _environment(_services()["postgres"])
    urls = _compose_database_urls()
    assert {"migrate", *_server_services()} <= set(urls), (
        "migrate and every server need EIGHTOFF_DATABASE_URL"
    )
    assert len(set(urls.values())) == 1, f"services disagree on the database: {urls}"
    url = make_url(next(iter(urls.values())))
    assert url.drivername == "postgresql+asyncpg"
    assert url.host == "postgres" and (url.port or 5432) == 5432
    assert url.username == postgres_env["POSTGRES_USER"]
    assert url.password == postgres_env["POSTGRES_PASSWORD"]
    assert url.database == postgres_env["POSTGRES_DB"]
    for name, service in _server_services().items():
        assert _effective_settings(service).database_url == str(urls[name])


def test_compose_redis_url_points_at_the_redis_service() -> None:
    for name, service in _server_services().items():
        redis_url = _environment(service).get("EIGHTOFF_REDIS_URL")
        assert redis_url, f"{name} sets no EIGHTOFF_REDIS_URL"
        url = make_url(redis_url)
        assert url.drivername == "redis" and url.host == "redis" and (url.port or 6379) == 6379


def test_compose_start_order() -> None:
    services = _services()
    migrate = services["migrate"]
    assert _depends_on(migrate).get("postgres") == "service_healthy"
    assert migrate.get("restart") == "no", (
        'migrate runs once: restart: "no" (quoted, YAML reads bare no as false)'
    )
    for name, service in _server_services().items():
        depends = _depends_on(service)
        assert depends.get("migrate") == "service_completed_successfully", name
        assert depends.get("redis") == "service_healthy", name
    assert set(_server_services()) <= set(_depends_on(services["lb"])), "lb must start after every server"
    # service_healthy is only satisfiable for a service that has a healthcheck
    for name, service in services.items():
        for target, condition in _depends_on(service).items():
            assert target in services, f"{name} depends on unknown service {target}"
            if condition == "service_healthy":
                has_check = "healthcheck" in services[target] or (
                    _is_app_service(services[target]) and _dockerfile("HEALTHCHECK")
                )
                assert has_check, f"{name} waits for {target} healthy, but {target} has no healthcheck"


def test_compose_healthchecks() -> None:
    services = _services()
    postgres_test = " ".join(_argv(services["postgres"]["healthcheck"]["test"]))
    assert "pg_isready" in postgres_test
    assert "redis-cli" in _argv(services["redis"]["healthcheck"]["test"])
    assert "ping" in _argv(services["redis"]["healthcheck"]["test"])
    volumes = services["postgres"].get("volumes") or []
    named = [str(volume).split(":", 1)[0] for volume in volumes]
    assert any(name in (_compose().get("volumes") or {}) for name in named), "postgres needs a named volume"


def test_compose_lb_mounts_haproxy_config_and_publishes_the_port() -> None:
    lb = _services()["lb"]
    mounts = [str(volume).split(":") for volume in lb.get("volumes") or []]
    sources = {
        Path(parts[0]).as_posix().removeprefix("./")
        for parts in mounts
        if parts[1] == HAPROXY_CFG_IN_CONTAINER
    }
    assert sources == {HAPROXY_CFG.relative_to(ROOT).as_posix()}, (
        f"lb must mount deploy/haproxy.cfg: {mounts}"
    )
    bind_ports = {int(words[1].rpartition(":")[2]) for words in _haproxy_lines() if words[0] == "bind"}
    published = {str(port).rpartition(":")[2] for port in lb.get("ports") or []}
    assert {str(port) for port in bind_ports} <= published, (
        f"lb publishes {published}, haproxy binds {bind_ports}"
    )
    assert any(str(port).split(":")[0] == str(DEFAULT_PORT) for port in lb["ports"]), (
        "publish 8765 on the host"
    )


@pytest.mark.skipif(shutil.which("docker") is None, reason="docker CLI not installed")
def test_compose_config_validates_with_docker_compose() -> None:
    version = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True, timeout=60)
    if version.returncode != 0:
        pytest.skip(f"`docker compose` plugin not available: {(version.stderr or version.stdout).strip()}")
    result = subprocess.run(
        ["docker", "compose", "-f", str(COMPOSE_FILE), "config", "-q"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr


# ---------------------------------------------------------------- deploy/haproxy.cfg


def test_haproxy_config_balances_every_server() -> None:
    lines = _haproxy_lines()
    assert ["mode", "http"] in lines, "WebSockets need mode http (HAProxy then tunnels the upgraded stream)"
    assert any(words[:2] == ["timeout", "tunnel"] for words in lines), (
        "long-lived WebSockets need timeout tunnel"
    )
    assert any(words[:2] == ["option", "httpchk"] and "/healthz" in words for words in lines)
    assert any(words[0] == "balance" and words[1] in ("leastconn", "source") for words in lines)
    servers = _haproxy_servers()
    server_services = _server_services()
    assert {host for host, _ in servers.values()} == set(server_services), "haproxy must name every server"
    for name, service in server_services.items():
        port = _effective_settings(service).port
        assert servers[name] == (name, port), (
            f"haproxy reaches {name} on {servers[name]}, it listens on {port}"
        )


@pytest.mark.skipif(shutil.which("haproxy") is None, reason="haproxy not installed")
def test_haproxy_config_passes_haproxy_check() -> None:
    # The server names resolve only inside the compose network; init-addr none lets the check pass anyway.
    result = subprocess.run(
        ["haproxy", "-c", "-f", str(HAPROXY_CFG)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


# ---------------------------------------------------------------- deploy/nftables-guard.nft


def _guard_rules() -> list[str]:
    return [
        line.strip() for line in NFTABLES_GUARD.read_text(encoding="utf-8").splitlines() if "dport" in line
    ]


def test_nftables_guard_meters_the_servers_port_and_addresses_as_the_server_counts_them() -> None:
    defaults = Settings()
    rules = _guard_rules()
    assert len(rules) == 2, rules  # one for IPv4 sources, one for IPv6
    network = ipaddress.IPv6Network(f"::/{defaults.ipv6_prefix}")
    for rule in rules:
        assert f"tcp dport {DEFAULT_PORT} " in rule
        match = re.search(r"limit rate over (\d+)/second burst (\d+) packets \} drop$", rule)
        assert match is not None, rule
        rate, burst = int(match[1]), int(match[2])
        # never stricter than the server's own budget for new connections: the kernel must not turn
        # away what the server would admit
        assert defaults.new_connections_per_address_per_second is not None
        assert rate >= defaults.new_connections_per_address_per_second
        assert burst >= 2 * defaults.new_connections_per_address_per_second
    assert "{ ip saddr limit" in rules[0]
    assert f"{{ ip6 saddr & {network.netmask.compressed} limit" in rules[1], "IPv6 by the server's prefix"


def test_nftables_guard_passes_nfts_check() -> None:
    nft = shutil.which("nft") or shutil.which("nft", path="/usr/sbin:/sbin")
    if nft is None:
        unavailable("nft (Debian's nftables) is not installed")
    if os.geteuid() != 0:
        unavailable("nft -c needs root (its netlink cache)")
    result = subprocess.run(
        [nft, "-c", "-f", str(NFTABLES_GUARD)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


# ---------------------------------------------------------------- Dockerfile


def test_dockerfile_cmd_and_expose() -> None:
    assert _dockerfile("FROM")[0].startswith("python:3.11-slim")
    args = _parse_cli(_dockerfile_cmd())
    assert args.command == "serve"
    assert settings_from_args(args, environ={}).host == "0.0.0.0"
    exposed = {int(port.split("/")[0]) for ports in _dockerfile("EXPOSE") for port in ports.split()}
    assert exposed == {DEFAULT_PORT}


def test_dockerfile_installs_the_project_as_a_non_root_user() -> None:
    runs = " ".join(_dockerfile("RUN"))
    assert re.search(r"pip install (\S+ )*\.(\s|&|$)", runs), "install with `pip install .`"
    assert not re.search(r"pip install .*(-e|--editable)\b", runs), (
        "the image installs the project non-editable"
    )
    users = _dockerfile("USER")
    assert users and users[-1].split(":")[0] not in ("root", "0"), "the server must not run as root"
    # Every top-level package setuptools installs, and the readme pyproject names, is copied into the build.
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    copied = {Path(word).as_posix().rstrip("/") for copy in _dockerfile("COPY") for word in copy.split()[:-1]}
    find = pyproject["tool"]["setuptools"]["packages"]["find"]
    roots = [where for where in find.get("where", ["."]) if where != "."]  # client/: a package's folder
    needed = {
        next((root for root in roots if (ROOT / root / pattern.rstrip("*")).is_dir()), pattern.rstrip("*"))
        for pattern in find["include"]
    }
    needed |= {"pyproject.toml", pyproject["project"]["readme"]}
    assert needed <= copied, f"the Dockerfile does not copy {sorted(needed - copied)}"
    for source in copied:
        assert (ROOT / source).exists(), f"COPY {source}: no such file"


def test_dockerignore_keeps_out_local_state_but_not_the_sources() -> None:
    patterns = [line.strip() for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()]
    patterns = [pattern.rstrip("/") for pattern in patterns if pattern and not pattern.startswith("#")]
    for unwanted in (".venv", ".git", "*.sqlite3"):
        assert unwanted in patterns, f".dockerignore should exclude {unwanted}"
    copied = [word for copy in _dockerfile("COPY") for word in copy.split()[:-1]]
    for source in copied:
        hits = [pattern for pattern in patterns if fnmatch.fnmatch(source.rstrip("/"), pattern)]
        assert not hits, f".dockerignore excludes {source}, which the Dockerfile copies ({hits})"


class _Healthz(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/healthz" else 404)
        self.end_headers()
        self.wfile.write(b"ok\n")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def healthz_server() -> Iterator[int]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Healthz)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _healthcheck_argv() -> list[str]:
    (healthcheck,) = _dockerfile("HEALTHCHECK")
    _, _, command = healthcheck.partition("CMD ")
    argv = json.loads(command)
    assert argv[:2] == ["python", "-c"], "slim has no curl: the healthcheck runs python"
    assert "/healthz" in argv[2]
    return [sys.executable, *argv[1:]]


def test_dockerfile_healthcheck_probes_healthz(healthz_server: int) -> None:
    argv = _healthcheck_argv()
    environ = {**os.environ, "EIGHTOFF_PORT": str(healthz_server)}
    assert subprocess.run(argv, env=environ, capture_output=True, timeout=30).returncode == 0
    with socket.socket() as probe:  # a port nobody listens on: the check must fail
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    environ["EIGHTOFF_PORT"] = str(closed_port)
    assert subprocess.run(argv, env=environ, capture_output=True, timeout=30).returncode != 0
    # Without EIGHTOFF_PORT it probes the default port the server listens on.
    assert f"'{DEFAULT_PORT}'" in argv[2] or f":{DEFAULT_PORT}/" in argv[2]
