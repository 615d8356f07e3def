"""A maintainer's everyday commands: bare ``pytest`` from the root collects what ``python -m pytest``
does; CI runs the hypothesis profile "ci"; the import-linter contracts that CI runs catch each kind of
layering violation."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import grimp
import pytest
from hypothesis import settings
from importlinter import ContractCheck

from tools.import_contracts import StandardLibraryOnlyContract

ROOT = Path(__file__).parents[1]
BIN = Path(sys.executable).parent
_COLLECTED = re.compile(r"^(\d+) tests? collected", re.MULTILINE)


def run(
    argv: list[str], *, env: dict[str, str] | None = None, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_ci_runs_every_check_before_the_tests() -> None:
    """Each check can fail CI, and pytest's summary stays the last line CI prints."""
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    tests = next(i for i, line in enumerate(lines) if line.endswith(".venv/bin/python -m pytest"))
    assert tests == max(i for i, line in enumerate(lines) if line.strip() and not line.startswith("#"))
    for check in ("ruff check .", "ruff format --check .", "mypy", "lint-imports"):
        assert lines.index(f".venv/bin/{check}") < tests, check
    assert "set -euo pipefail" in lines


#: A collection only, in one process (no workers).
_COLLECT = ["--collect-only", "-q", "-p", "no:cacheprovider", "-n", "0"]


def test_bare_pytest_from_the_root_collects_what_python_m_pytest_does(request: pytest.FixtureRequest) -> None:
    """Bare ``pytest`` does not put the root on sys.path; tests/server must not shadow the server package."""
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    bare = run([str(BIN / "pytest"), *_COLLECT], env=environ)
    assert bare.returncode == 0, bare.stdout[-3000:] + bare.stderr[-3000:]
    assert "error" not in bare.stdout.lower().splitlines()[-1]
    bare_count = _COLLECTED.search(bare.stdout)
    assert bare_count
    assert int(bare_count[1]) == _collected_by_python_m_pytest(request, environ) > 1000


def _collected_by_python_m_pytest(request: pytest.FixtureRequest, environ: dict[str, str]) -> int:
    """How many tests ``python -m pytest`` collects from the root: this session's own count when it is
    that run (the README's command; each xdist worker collects the whole suite), else a collection of
    its own, which costs as much CPU again."""
    options = request.config.option
    narrowed = (
        options.keyword
        or options.markexpr
        or options.deselect
        or getattr(options, "lf", False)
        or getattr(options, "stepwise", False)
    )
    whole = request.config.args in ([], [str(ROOT)], request.config.getini("testpaths")) and not narrowed
    if whole:
        return len(request.session.items)
    found = _COLLECTED.search(run([sys.executable, "-m", "pytest", *_COLLECT], env=environ).stdout)
    assert found
    return int(found[1])


def test_every_test_folder_is_a_package() -> None:
    """A folder without ``__init__.py`` would be put on sys.path and its modules named by their file
    name alone: tests/server would shadow the server package again, and two folders could not both
    hold a ``test_records.py``."""
    folders = {path.parent for path in (ROOT / "tests").rglob("*.py") if "__pycache__" not in path.parts}
    assert folders and all((folder / "__init__.py").is_file() for folder in folders), sorted(
        str(folder.relative_to(ROOT)) for folder in folders if not (folder / "__init__.py").is_file()
    )


@pytest.mark.parametrize(("ci", "profile"), [("true", "ci"), (None, "dev"), ("false", "dev")])
def test_the_ci_profile_is_loaded_exactly_when_ci_is_set(ci: str | None, profile: str) -> None:
    """pytest's header names the active profile and what it changes (Hypothesis' own plugin prints it)."""
    environ = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        environ["CI"] = ci
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-v", "-p", "no:cacheprovider", __file__]
    header = re.search(r"^hypothesis profile '(\w+)' -> (.*)$", run(argv, env=environ).stdout, re.MULTILINE)
    assert header, "no hypothesis profile in pytest's header"
    assert header[1] == profile
    if profile == "ci":
        assert (
            "derandomize=True" in header[2]
            and "max_examples=200" in header[2]
            and "database=None" in header[2]
        )
    else:
        assert "derandomize" not in header[2] and "max_examples" not in header[2]  # the defaults: 100, random


def test_this_run_uses_the_profile_its_environment_selects() -> None:
    """Under CI (which sets CI=true), this very run is derandomized with the CI budget."""
    if os.environ.get("CI") == "true":
        assert settings.get_current_profile_name() == "ci"
        assert settings.default is not None
        assert settings.default.derandomize and settings.default.max_examples == 200
    else:
        assert settings.get_current_profile_name() == "dev"


def graph_of(imports: dict[str, list[str]]) -> grimp.ImportGraph:
    graph = grimp.ImportGraph()
    for importer, imported_modules in imports.items():
        parts = importer.split(".")
        for depth in range(1, len(parts) + 1):  # a module's packages are in the graph too
            graph.add_module(".".join(parts[:depth]))
        for imported in imported_modules:
            graph.add_import(importer=importer, imported=imported, line_number=1, line_contents="import x")
    return graph


def standard_library_only(graph: grimp.ImportGraph, source: str, *allowed: str) -> ContractCheck:
    options: dict[str, object] = {"source_modules": [source]}
    if allowed:
        options["allowed_modules"] = list(allowed)
    return StandardLibraryOnlyContract("test", {}, options).check(graph, verbose=False)


def test_standard_library_only_allows_itself_the_standard_library_and_the_named_packages() -> None:
    graph = graph_of(
        {
            "engine.cards": ["engine.piles", "collections.abc", "dataclasses", "__future__"],
            "protocol.codec": ["engine", "engine.cards", "msgpack", "json"],
        }
    )
    assert standard_library_only(graph, "engine").kept
    assert standard_library_only(graph, "protocol", "engine", "msgpack").kept


def test_standard_library_only_names_each_other_import() -> None:
    graph = graph_of(
        {
            "engine.cards": ["msgpack", "json", "protocol.codec"],
            "engine": ["engineering"],  # a name that merely starts like the package
            "protocol.codec": ["engine", "msgpack", "websockets.frames", "server.edge.connections"],
        }
    )
    engine = standard_library_only(graph, "engine")
    assert not engine.kept
    assert [(i["importer"], i["imported"]) for i in engine.metadata["illegal"]] == [
        ("engine", "engineering"),
        ("engine.cards", "msgpack"),
        ("engine.cards", "protocol.codec"),
    ]
    protocol = standard_library_only(graph, "protocol", "engine", "msgpack")
    assert [i["imported"] for i in protocol.metadata["illegal"]] == [
        "server.edge.connections",
        "websockets.frames",
    ]


def test_lint_imports_breaks_each_contract_on_its_violation(tmp_path: Path) -> None:
    """A copy of the tree with one violation of each rule: every contract in pyproject.toml is broken."""
    for name in ("engine", "protocol", "solver", "server", "migrations", "bench", "tools", "client"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "build"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    violations = {
        "client/eightoff_client/board.py": "import engine",
        "engine/cards.py": "import sqlalchemy",
        "protocol/codec.py": "import websockets",
        "engine/piles.py": "import server",
        "server/storage/records.py": "import protocol",
        "solver/search.py": "import msgpack",
        "server/clock.py": "import server.app",
        "server/play/session.py": "import server.play.race.room",
        "server/play/race/room.py": "import server.play.event",
    }
    for path, line in violations.items():
        with (tmp_path / path).open("a") as source:
            source.write(f"\n{line}  # noqa\n")
    # The client library lives in client/ (its own distribution): the copy's, not the installed one.
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "client")}
    result = run([str(BIN / "lint-imports"), "--no-cache"], cwd=tmp_path, env=env)
    assert result.returncode == 1
    assert "Contracts: 0 kept, 9 broken." in result.stdout
    for message in (
        "eightoff_client.board is not allowed to import engine",
        "engine.cards is not allowed to import sqlalchemy",
        "protocol.codec is not allowed to import websockets",
        "engine.piles -> server",
        "server.storage.records -> protocol",
        "solver.search is not allowed to import msgpack",
        "server.clock -> server.app",
        "server.play.session -> server.play.race.room",
        "server.play.race.room -> server.play.event",
    ):
        assert message in result.stdout, message


BENCH_FOLDER = Path(__file__).resolve().parents[1] / "bench"
#: Every runnable module of bench/ (the benches, the echo server, the sampled server).
BENCHES = sorted(
    path.stem for path in BENCH_FOLDER.glob("*.py") if 'if __name__ == "__main__":' in path.read_text()
)


#: Runs each module named on its command line as ``python -m MODULE --help`` would, one after the
#: other in one interpreter (each is a second of imports alone), and prints what each did as JSON.
_HELP_OF_EACH = """
import contextlib, io, json, runpy, sys
done = {}
for module in sys.argv[1:]:
    out, err, code = io.StringIO(), io.StringIO(), None
    sys.argv = [module, "--help"]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        except SystemExit as exit:
            code = exit.code
    done[module] = {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}
print(json.dumps(done))
"""


@pytest.fixture(scope="module")
def bench_help() -> dict[str, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-c", _HELP_OF_EACH, *(f"bench.{bench}" for bench in BENCHES)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    answers: dict[str, dict[str, Any]] = json.loads(done.stdout.splitlines()[-1])
    return answers


@pytest.mark.parametrize("bench", BENCHES)
def test_every_bench_answers_help_without_running(bench_help: dict[str, dict[str, Any]], bench: str) -> None:
    """``--help`` prints the bench's usage and exits at once: bench_request_path used to ignore it
    and run for a minute, and sampled_server wrote its report to a file named ``--help``."""
    done = bench_help[f"bench.{bench}"]
    assert done["code"] == 0, done["stderr"]
    assert done["stdout"].startswith("usage:"), done["stdout"][:200]
