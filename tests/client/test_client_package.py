"""The client is a distribution of its own that needs neither the server nor its dependencies."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

CLIENT = Path(__file__).parents[2] / "client"


def test_the_client_distribution_depends_on_websockets_and_msgpack_only() -> None:
    project = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "eightoff-client"
    assert sorted(dependency.split(">")[0] for dependency in project["dependencies"]) == [
        "msgpack",
        "websockets",
    ]
    assert (CLIENT / "eightoff_client" / "py.typed").exists()


def test_the_client_imports_nothing_but_the_standard_library_websockets_and_msgpack() -> None:
    """What lint-imports checks in CI, stated where a reader of the tests looks for it."""
    allowed = set(sys.stdlib_module_names) | {"websockets", "msgpack", "eightoff_client"}
    for path in (CLIENT / "eightoff_client").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] in allowed | {"__future__"}, f"{path.name} imports {name}"
