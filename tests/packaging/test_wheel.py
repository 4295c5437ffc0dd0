"""The built wheel, installed in a clean virtual environment, holds every subpackage and data
file, and its CLI works: `tenantq --help` and `tenantq db upgrade` against a real database.
(An editable install hides a package missing from the wheel; this does not.)"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import uuid
import zipfile
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
#: package -> source folder, as setuptools maps them (``package-dir``).
PACKAGE_DIRS: dict[str, str] = PYPROJECT["tool"]["setuptools"]["package-dir"]
#: Folders that hold a package of their own (an ``__init__.py``) under the mapped roots.
SOURCE_PACKAGES = sorted(
    str(init.parent.relative_to(ROOT))
    for folder in set(PACKAGE_DIRS.values())
    for init in (ROOT / folder).rglob("__init__.py")
)


def test_every_source_package_is_mapped_and_listed() -> None:
    mapped = set(PACKAGE_DIRS.values())
    assert set(SOURCE_PACKAGES) == mapped, "a folder with __init__.py has no package-dir entry"
    assert set(PYPROJECT["tool"]["setuptools"]["packages"]) == set(PACKAGE_DIRS)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (path,) = out.glob("tenantq-*.whl")
    return path


def test_wheel_has_every_package_and_data_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for package, folder in PACKAGE_DIRS.items():
        target = package.replace(".", "/")
        for file in (ROOT / folder).iterdir():
            if file.suffix in (".avsc", ".py"):
                assert f"{target}/{file.name}" in names, f"{folder}/{file.name}"
    for data in (
        "tenantq/py.typed",
        "tenantq/migrations/env.py",
        "tenantq/migrations/script.py.mako",
        "tenantq/devstack/kafka-broker.pom.xml",
        "tenantq/devstack/log4j2.xml",
    ):
        assert data in names, data
    # The console's templates and static files (package-data, not modules).
    for folder in ("templates", "static"):
        shipped = sorted(path.name for path in (ROOT / "web" / folder).iterdir())
        assert shipped, folder
        for file in shipped:
            assert f"tenantq/web/{folder}/{file}" in names, f"web/{folder}/{file}"
    assert not any(name.startswith(("tests/", "loadtest/")) for name in names)


@pytest.mark.integration
def test_installed_wheel_runs_cli_and_migrates(
    wheel: Path, tmp_path: Path, database_url_for_wheel: str
) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = venv / "bin" / "pip"
    subprocess.run([str(pip), "install", "-q", str(wheel)], check=True, capture_output=True)
    tenantq = venv / "bin" / "tenantq"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENANTQ_")}
    env["TENANTQ_DATABASE_URL"] = database_url_for_wheel
    env["TENANTQ_DEV_HOME"] = str(tmp_path / "no-stack")
    # Run from a folder without the source tree, so only the installed wheel can be imported.
    help_run = subprocess.run(
        [str(tenantq), "--help"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert help_run.returncode == 0, help_run.stderr
    for command in ("dev", "db", "topics", "web"):
        assert command in help_run.stdout
    upgrade = subprocess.run(
        [str(tenantq), "db", "upgrade"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert upgrade.returncode == 0, upgrade.stderr + upgrade.stdout
    current = subprocess.run(
        [str(tenantq), "db", "current"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert "up to date" in current.stdout, current.stdout + current.stderr


@pytest.fixture
def database_url_for_wheel() -> object:
    """An empty database on the real server (the dev stack's or TENANTQ_DATABASE_URL's)."""
    import tenantq

    server = tenantq.load_settings().require_database_url()
    name = f"tenantq_wheel_{uuid.uuid4().hex[:8]}"
    admin = make_url(server).set(database="postgres").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield make_url(server).set(database=name).render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
