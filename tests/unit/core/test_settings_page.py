"""docs/settings.md is generated from the settings model: a setting added, removed or described
anew without regenerating the page fails here, with the command that regenerates it; and every
setting is on the page with a description."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from docs_scripts import docs_script
from pydantic import BaseModel

from tenantq.settings import Settings

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "settings.md"


def _generator() -> ModuleType:
    return docs_script("generate_settings")


def test_the_page_is_current() -> None:
    assert PAGE.read_text() == _generator().render(), (
        "docs/settings.md is not current: run .venv/bin/python docs/generate_settings.py"
    )


def test_every_setting_is_on_the_page_with_a_description() -> None:
    page = PAGE.read_text()
    for name, field in Settings.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            for inner, inner_field in annotation.model_fields.items():
                assert f"`TENANTQ_{name.upper()}__{inner.upper()}`" in page
                assert inner_field.description, f"{name}.{inner} has no description"
        elif name == "queues":
            assert "`TENANTQ_QUEUES`" in page
        else:
            assert f"`TENANTQ_{name.upper()}`" in page
            assert field.description, f"{name} has no description"


def test_a_stale_page_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    generator = _generator()
    page = tmp_path / "settings.md"
    monkeypatch.setattr(generator, "PAGE", page)
    page.write_text(generator.render().replace("Handler slots per process.", "Slots."))
    assert generator.main(["--check"]) == 1
    assert generator.main([]) == 0
    assert generator.main(["--check"]) == 0
