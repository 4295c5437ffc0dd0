"""The test tree itself: pytest must be able to collect every module under a name of its own."""

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_unit_test_folder_is_a_package() -> None:
    # Without __init__.py pytest imports a module by its bare file name, and two
    # test_errors.py in different folders then collide at collection.
    missing = [
        str(folder.relative_to(TESTS))
        for folder in (TESTS / "unit").rglob("*")
        if folder.is_dir()
        and folder.name != "__pycache__"
        and any(folder.glob("test_*.py"))
        and not (folder / "__init__.py").exists()
    ]
    assert missing == []


def test_rootless_test_modules_have_distinct_names() -> None:
    # Modules outside a package (tests/integration, tests/packaging) share one
    # namespace with every other rootless module.
    rootless = [
        path.name for path in TESTS.rglob("test_*.py") if not (path.parent / "__init__.py").exists()
    ]
    clashes = [name for name, count in Counter(rootless).items() if count > 1]
    assert clashes == []
