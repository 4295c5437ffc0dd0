"""The generators in ``docs/`` (scripts, not modules of the package), loaded for the tests that
check their pages are current."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

DOCS = Path(__file__).resolve().parents[1] / "docs"


def docs_script(name: str) -> ModuleType:
    """``docs/<name>.py`` as a module named ``name``, loaded anew (a test may patch it)."""
    spec = importlib.util.spec_from_file_location(name, DOCS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
