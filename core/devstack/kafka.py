"""The real Apache Kafka broker for local development: KRaft nodes bound to 127.0.0.1, their
jars resolved once per version from Maven Central with ``mvn``. What each node's
``server.properties`` holds is ``tenantq.devstack.kafka_config``."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from tenantq.devstack.processes import pid_alive, wait_until
from tenantq.devstack.secrets import redact
from tenantq.errors import DevStackError

MINIMUM_JAVA = 17
_COMPLETE_MARKER = ".resolved"


def jar_cache(dev_home: Path, version: str) -> Path:
    """Where the jars of broker ``version`` are kept (shared by every node of the home)."""
    return dev_home / "cache" / f"kafka-{version}" / "libs"


@dataclass(frozen=True)
class KafkaNodePaths:
    """The files of one node. Node 1 keeps the layout of the single-broker stack, so a home
    made before clusters keeps its storage; the others live under ``kafka/node-<id>``."""

    data: Path
    config: Path
    log: Path
    stdout: Path

    @classmethod
    def under(cls, dev_home: Path, node_id: int = 1) -> KafkaNodePaths:
        root = dev_home / "kafka" if node_id == 1 else dev_home / "kafka" / f"node-{node_id}"
        return cls(
            data=root / "data",
            config=root / "server.properties",
            log=root / "server.log",
            stdout=root / "stdout.log",
        )


def find_java() -> str:
    """The ``java`` to run the broker: ``$JAVA_HOME/bin/java`` or the one on PATH, >= 17.
    Falls back to any newer JDK under /usr/lib/jvm when the default is too old."""
    candidates = []
    if os.environ.get("JAVA_HOME"):
        candidates.append(str(Path(os.environ["JAVA_HOME"]) / "bin" / "java"))
    on_path = shutil.which("java")
    if on_path:
        candidates.append(on_path)
    jvm_root = Path("/usr/lib/jvm")
    if jvm_root.is_dir():
        candidates.extend(str(p / "bin" / "java") for p in sorted(jvm_root.iterdir()))
    for java in candidates:
        if Path(java).exists() and java_major_version(java) >= MINIMUM_JAVA:
            return java
    raise DevStackError(f"no Java {MINIMUM_JAVA}+ found (set JAVA_HOME); the Kafka broker needs it")


def java_major_version(java: str) -> int:
    try:
        output = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        ).stderr
    except (OSError, subprocess.TimeoutExpired):
        return 0
    match = re.search(r'version "(\d+)(?:\.(\d+))?', output)
    if not match:
        return 0
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def resolve_jars(libs: Path, version: str, log: Path) -> None:
    """Download the jars of broker ``version`` into ``libs`` with Maven once; later calls reuse
    them."""
    if (libs / _COMPLETE_MARKER).exists():
        return
    mvn = shutil.which("mvn")
    if mvn is None:
        raise DevStackError("Maven (`mvn`) is needed once to fetch the Kafka broker's jars")
    work = libs.parent
    work.mkdir(parents=True, exist_ok=True)
    pom_text = resources.files("tenantq.devstack").joinpath("kafka-broker.pom.xml").read_text()
    (work / "pom.xml").write_text(pom_text.replace("@KAFKA_VERSION@", version))
    if libs.exists():
        shutil.rmtree(libs)
    command = [
        mvn,
        "-q",
        "-B",
        "-f",
        str(work / "pom.xml"),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={libs}",
        "-DincludeScope=runtime",
    ]
    with log.open("ab") as out:
        result = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)
    if result.returncode != 0 or not any(libs.glob("kafka_2.13-*.jar")):
        raise DevStackError(f"mvn could not resolve Kafka {version}; see {log}")
    (libs / _COMPLETE_MARKER).write_text(version)


def write_config(paths: KafkaNodePaths, properties: Mapping[str, str]) -> None:
    """Write ``server.properties`` (owner-only: a secure node's holds a password)."""
    from tenantq.devstack.kafka_config import render_properties

    paths.data.mkdir(parents=True, exist_ok=True)
    _write_private(paths.config, render_properties(dict(properties)))


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(text)
    path.chmod(0o600)


def formatted(paths: KafkaNodePaths) -> bool:
    return (paths.data / "meta.properties").exists()


def format_storage(
    java: str,
    libs: Path,
    paths: KafkaNodePaths,
    cluster_id: str,
    extra_arguments: Iterable[str] = (),
    secrets: Iterable[str] = (),
) -> None:
    """Format the node's storage for ``cluster_id`` (every node of a cluster shares it) unless
    it is formatted already. ``extra_arguments`` add SCRAM users; ``secrets`` are masked in
    the error should formatting fail."""
    if formatted(paths):
        return
    command = [
        java,
        "-cp",
        f"{libs}/*",
        "kafka.tools.StorageTool",
        "format",
        "-t",
        cluster_id,
        "-c",
        str(paths.config),
        *extra_arguments,
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    if result.returncode != 0:
        output = redact(f"{result.stdout}{result.stderr}", secrets)
        raise DevStackError(f"formatting Kafka storage failed: {output}")


def new_cluster_id(random_bytes: Callable[[], bytes] | None = None) -> str:
    """A KRaft cluster id: 16 random bytes in URL-safe base64 without padding, drawn again
    when it begins with '-' (as Kafka's own ``Uuid.randomUuid`` does): ``kafka-storage
    format -t -x...`` reads such an id as an option and fails, one start in 64."""
    import base64
    import uuid

    while True:
        raw = random_bytes() if random_bytes is not None else uuid.uuid4().bytes
        cluster_id = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def start_broker(java: str, libs: Path, paths: KafkaNodePaths, jvm_options: Sequence[str]) -> int:
    """Start the node detached from this process, with ``jvm_options`` (heap, collector);
    return its pid."""
    log4j = resources.files("tenantq.devstack").joinpath("log4j2.xml")
    log4j_path = paths.config.parent / "log4j2.xml"
    log4j_path.write_text(log4j.read_text())
    command = [
        java,
        *jvm_options,
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log4j_path}",
        f"-Dtenantq.kafka.log={paths.log}",
        "-cp",
        f"{libs}/*",
        "kafka.Kafka",
        str(paths.config),
    ]
    with paths.stdout.open("ab") as out:
        process = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return process.pid


def broker_answers(
    bootstrap: str,
    client_config: Mapping[str, str] | None = None,
    node_id: int | None = None,
    timeout: float = 2.0,
) -> bool:
    """True when the broker(s) at ``bootstrap`` answer with metadata that lists a broker
    (``node_id``: that one, registered and unfenced)."""
    from confluent_kafka.admin import AdminClient

    config: dict[str, Any] = dict(client_config or {})
    # log_level 0: a broker that is still starting is expected, not worth a log line.
    config.update({"bootstrap.servers": bootstrap, "socket.timeout.ms": 2000, "log_level": 0})
    admin = AdminClient(config)
    try:
        metadata = admin.list_topics(timeout=timeout)
    except Exception:
        return False
    if node_id is None:
        return bool(metadata.brokers)
    return node_id in metadata.brokers


def wait_for_brokers(
    nodes: Mapping[int, tuple[str, int, KafkaNodePaths]],
    client_config: Mapping[str, str] | None,
    timeout: float,
) -> None:
    """Wait until each node (``node_id -> (endpoint, pid, paths)``) answers and lists itself;
    a node that exits meanwhile is an error with the tail of its output."""
    waiting = dict(nodes)

    def ready() -> bool:
        for node_id, (endpoint, pid, paths) in list(waiting.items()):
            if not pid_alive(pid):
                tail = (
                    paths.stdout.read_text(errors="replace")[-2000:]
                    if paths.stdout.exists()
                    else ""
                )
                raise DevStackError(f"Kafka node {node_id} exited during start-up:\n{tail}")
            if broker_answers(endpoint, client_config, node_id=node_id, timeout=1.0):
                del waiting[node_id]
        return not waiting

    if not wait_until(ready, timeout=timeout, interval=0.25):
        names = ", ".join(f"node {node_id} (see {nodes[node_id][2].log})" for node_id in waiting)
        raise DevStackError(f"Kafka did not answer within {timeout:.0f}s: {names}")
