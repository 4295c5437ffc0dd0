"""Run pytest against a dev stack of one topology of its own: ``make test-secure`` (Kafka
over SASL_SSL with SCRAM-SHA-512 and PostgreSQL over TLS with a password) and ``make
test-kafka39`` (the oldest broker tenantq supports, with the classic group protocol).

The stack lives in a temporary home (``topology_stack.TopologyStack``: the shared dev stack
is never touched, the broker jars are linked from a cache), pytest is given what ``tenantq
dev env`` prints plus ``TENANTQ_DEV_HOME`` and the ``--env`` variables, and the stack is
taken down whatever pytest did. The exit status is pytest's.

    python tests/integration/on_topology.py --secure -- tests -q
    python tests/integration/on_topology.py --kafka-version 3.9.1 \\
        --env TENANTQ_WORKER__GROUP_PROTOCOL=classic -- tests/integration/test_x.py
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time

from topology_stack import TopologyStack


def exported(dev_env_output: str) -> dict[str, str]:
    """The variables of ``tenantq dev env`` (``export NAME=VALUE`` lines, shell-quoted)."""
    variables = {}
    for line in dev_env_output.splitlines():
        if not line.startswith("export "):
            continue
        name, _, value = line.removeprefix("export ").partition("=")
        variables[name] = shlex.split(value)[0] if value else ""
    return variables


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--secure", action="store_true", help="SASL_SSL + TLS with passwords")
    parser.add_argument("--kafka-version", default=None, help="the broker version, e.g. 3.9.1")
    parser.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE", help="for pytest"
    )
    parser.add_argument("pytest_arguments", nargs="*", help="after --: pytest's arguments")
    options = parser.parse_args()
    topology: dict[str, object] = {}
    if options.secure:
        topology["secure"] = True
    if options.kafka_version:
        topology["kafka_version"] = options.kafka_version
    stack = TopologyStack(**topology)
    try:
        seconds = stack.up()
        environment = {k: v for k, v in os.environ.items() if not k.startswith("TENANTQ_")}
        environment.update(exported(stack.cli("dev", "env").stdout))
        environment["TENANTQ_DEV_HOME"] = str(stack.home)
        for assignment in options.env:
            name, _, value = assignment.partition("=")
            environment[name] = value
        shown = ", ".join(f"{k}={v}" for k, v in topology.items()) or "defaults"
        print(f"on_topology: stack ({shown}) up in {seconds:.1f}s at {stack.home}", flush=True)
        started = time.monotonic()
        status = subprocess.call(
            [sys.executable, "-m", "pytest", *options.pytest_arguments], env=environment
        )
        print(f"on_topology: pytest ended with {status} after {time.monotonic() - started:.0f}s")
        return status
    finally:
        stack.down()


if __name__ == "__main__":
    sys.exit(main())
