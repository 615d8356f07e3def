"""docs/settings.md is what tools/settings_doc.py renders from Settings: every field, its help text and
its default, so adding or changing a setting without the reference fails here."""

from __future__ import annotations

from dataclasses import fields

from server.config import Settings
from tools.settings_doc import PATH, render


def test_docs_settings_md_is_generated_from_the_settings_dataclass() -> None:
    assert PATH.read_text() == render(), "run: python -m tools.settings_doc --write"


def test_every_setting_has_its_row_with_help_and_default() -> None:
    text = PATH.read_text()
    for setting in fields(Settings):
        flag = "--" + setting.name.replace("_", "-")
        row = next(line for line in text.splitlines() if line.startswith(f"| `{flag}` |"))
        assert f"`EIGHTOFF_{setting.name.upper()}`" in row
        assert setting.metadata["help"].replace("|", "\\|") in row
    assert "| `--port` | `EIGHTOFF_PORT` | `int` | `8765` |" in text
    assert "| `--idle-timeout` | `EIGHTOFF_IDLE_TIMEOUT` | `float \\| None` | `300` |" in text
