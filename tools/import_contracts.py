"""An import-linter contract type that built-in ones cannot state: "this package imports only the
standard library (and the packages named)". A ``forbidden`` contract would need every third-party
package listed, and would let through the next one somebody adds.

Registered in pyproject.toml (``[tool.importlinter] contract_types``); ``lint-imports`` runs from the
repository root, which it puts on ``sys.path``, so it finds ``tools``.
"""

from __future__ import annotations

import sys

from grimp import ImportGraph
from importlinter import Contract, ContractCheck, fields, output
from importlinter.domain.imports import Module

__all__ = ["StandardLibraryOnlyContract"]


class StandardLibraryOnlyContract(Contract):
    """Each source package may import, directly, only itself, the standard library and
    ``allowed_modules`` (each with its submodules). The graph must include external packages."""

    type_name = "standard_library_only"

    source_modules = fields.ListField(subfield=fields.ModuleField())
    allowed_modules = fields.ListField(subfield=fields.ModuleField(), required=False)

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        sources: list[Module] = self.source_modules  # type: ignore[assignment]
        allowed: list[Module] = self.allowed_modules or []  # type: ignore[assignment]
        illegal: list[dict[str, object]] = []
        for source in sources:
            permitted = [source, *allowed]
            for importer in sorted({source.name} | graph.find_descendants(source.name)):
                for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                    if not _is_permitted(Module(imported), permitted):
                        details = graph.get_import_details(importer=importer, imported=imported)
                        lines = [detail["line_number"] for detail in details]
                        illegal.append({"importer": importer, "imported": imported, "lines": lines})
        return ContractCheck(kept=not illegal, metadata={"illegal": illegal})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for entry in check.metadata["illegal"]:
            lines = ", ".join(f"l.{line}" for line in entry["lines"])
            output.print_error(f"{entry['importer']} is not allowed to import {entry['imported']} ({lines})")
            output.new_line()


def _is_permitted(imported: Module, permitted: list[Module]) -> bool:
    if imported.root_package_name in sys.stdlib_module_names:
        return True
    return any(imported == module or imported.is_descendant_of(module) for module in permitted)
