"""The package's surface and its purity: curated exports, and no I/O, clock or randomness inside."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

import protocol

MODULES = sorted(path.stem for path in Path(protocol.__file__).parent.glob("*.py") if path.stem != "__init__")
ALLOWED_OUTSIDE_STDLIB = {"msgpack", "engine", "protocol"}
FORBIDDEN_STDLIB = {
    "asyncio", "socket", "selectors", "ssl", "sqlite3", "random", "secrets", "time", "threading",
    "multiprocessing", "subprocess", "os", "io", "urllib", "http",
}  # fmt: skip


def test_protocol_version_is_1() -> None:
    assert protocol.PROTOCOL_VERSION == 1


def test_every_export_exists_and_is_listed_once() -> None:
    assert len(protocol.__all__) == len(set(protocol.__all__))
    for name in protocol.__all__:
        assert hasattr(protocol, name), name


@pytest.mark.parametrize("module", MODULES)
def test_every_module_says_what_it_owns_and_exports(module: str) -> None:
    loaded = importlib.import_module(f"protocol.{module}")
    assert loaded.__doc__ and loaded.__doc__.strip()
    for name in loaded.__all__:
        assert hasattr(loaded, name), f"protocol.{module}.{name}"


@pytest.mark.parametrize("module", [*MODULES, "__init__"])
def test_module_imports_only_stdlib_msgpack_and_engine(module: str) -> None:
    tree = ast.parse((Path(protocol.__file__).parent / f"{module}.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top == "__future__":
                continue
            assert top in ALLOWED_OUTSIDE_STDLIB or top in sys.stdlib_module_names, f"{module} imports {name}"
            assert top not in FORBIDDEN_STDLIB, f"{module} imports {name}: protocol/ does no I/O"


@pytest.mark.parametrize("module", [*MODULES, "__init__"])
def test_module_reads_no_clock(module: str) -> None:
    source = (Path(protocol.__file__).parent / f"{module}.py").read_text(encoding="utf-8")
    for call in (".now(", ".today(", ".utcnow(", "time.time(", "monotonic("):
        assert call not in source, f"{module} calls {call}"


def test_package_ships_its_spec_and_vectors() -> None:
    root = Path(protocol.__file__).parent
    for name in ("README.md", "asyncapi.yaml", "py.typed", "vectors/client_messages.json"):
        assert (root / name).is_file(), name
