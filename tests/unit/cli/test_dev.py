"""``tenantq dev``: status as JSON for scripts, env lines a shell can eval, and a bad
topology option as a one-line error, all without a running stack."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tenantq.cli import app, main
from tenantq.devstack.state import write_state


def _env(home: Path) -> dict[str, str]:
    return {
        "TENANTQ_DEV_HOME": str(home),
        "TENANTQ_KAFKA_BOOTSTRAP_SERVERS": "",
        "TENANTQ_DATABASE_URL": "",
    }


def test_status_json_of_a_stopped_stack_lists_its_processes_as_not_running(tmp_path: Path) -> None:
    write_state(
        tmp_path / "state.json",
        {
            "topology": {"brokers": 3, "standby": True, "secure": False, "kafka_version": "4.4.0"},
            "kafka_nodes": [
                {"node_id": n, "client_port": 1, "controller_port": 2, "pid": None}
                for n in (1, 2, 3)
            ],
            "postgres_nodes": [
                {"name": "a", "port": 3, "role": "primary", "pid": None},
                {"name": "b", "port": 4, "role": "standby", "pid": None},
            ],
        },
    )
    result = CliRunner().invoke(app, ["dev", "status", "--json"], env=_env(tmp_path))
    assert result.exit_code == 1, result.output
    processes = json.loads(result.stdout)
    assert [(p["server"], p["node"], p["role"]) for p in processes] == [
        ("kafka", "1", "broker+controller"),
        ("kafka", "2", "broker+controller"),
        ("kafka", "3", "broker+controller"),
        ("postgres", "a", "primary"),
        ("postgres", "b", "standby"),
    ]
    for process in processes:
        assert process["pid"] is None and process["running"] is False
        assert {"server", "role", "pid", "endpoint"} <= set(process)


def test_env_lines_survive_a_shell(tmp_path: Path) -> None:
    url = "postgresql://postgres@/tenantq?host=127.0.0.1,127.0.0.1&port=1,2&target_session_attrs=read-write"
    config = {"security.protocol": "SASL_SSL", "sasl.password": "pw"}
    write_state(
        tmp_path / "state.json",
        {"kafka_bootstrap_servers": "127.0.0.1:1", "kafka_config": config, "database_url": url},
    )
    result = CliRunner().invoke(app, ["dev", "env"], env=_env(tmp_path))
    assert result.exit_code == 0, result.output
    exported = {}
    for line in result.stdout.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        (exported[name],) = shlex.split(value)
    assert exported["TENANTQ_DATABASE_URL"] == url
    assert json.loads(exported["TENANTQ_KAFKA_CONFIG"]) == config
    assert exported["TENANTQ_KAFKA_BOOTSTRAP_SERVERS"] == "127.0.0.1:1"


def _main(arguments: list[str], home: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """Run the ``tenantq`` entry point (which turns a tenantq error into one line)."""
    for name, value in _env(home).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", ["tenantq", *arguments])
    with pytest.raises(SystemExit) as exited:
        main()
    return int(exited.value.code or 0)


def test_a_quorum_of_two_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _main(["dev", "up", "--brokers", "2"], tmp_path, monkeypatch) == 2
    error = capsys.readouterr().err
    assert error == "tenantq: --brokers must be one of 1, 3, 5, not 2\n"


def test_failover_without_a_standby_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _main(["dev", "failover"], tmp_path, monkeypatch) == 2
    assert capsys.readouterr().err == (
        "tenantq: no standby to fail over to (`tenantq dev up --standby`)\n"
    )
