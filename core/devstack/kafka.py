"""The real Apache Kafka broker for local development: one KRaft node (broker + controller)
bound to 127.0.0.1, its jars resolved once from Maven Central with ``mvn``."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from tenantq.devstack.processes import PortPair, wait_until
from tenantq.errors import DevStackError

#: The pinned broker version (Kafka 4.x runs on Java 17+).
KAFKA_VERSION = "4.1.1"
MINIMUM_JAVA = 17
_COMPLETE_MARKER = ".resolved"


@dataclass(frozen=True)
class KafkaPaths:
    libs: Path
    data: Path
    config: Path
    log: Path
    stdout: Path

    @classmethod
    def under(cls, dev_home: Path) -> KafkaPaths:
        return cls(
            libs=dev_home / "cache" / f"kafka-{KAFKA_VERSION}" / "libs",
            data=dev_home / "kafka" / "data",
            config=dev_home / "kafka" / "server.properties",
            log=dev_home / "kafka" / "server.log",
            stdout=dev_home / "kafka" / "stdout.log",
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


def resolve_jars(paths: KafkaPaths, log: Path) -> None:
    """Download the broker's jars with Maven once; later calls reuse the cache."""
    if (paths.libs / _COMPLETE_MARKER).exists():
        return
    mvn = shutil.which("mvn")
    if mvn is None:
        raise DevStackError("Maven (`mvn`) is needed once to fetch the Kafka broker's jars")
    work = paths.libs.parent
    work.mkdir(parents=True, exist_ok=True)
    pom_text = resources.files("tenantq.devstack").joinpath("kafka-broker.pom.xml").read_text()
    (work / "pom.xml").write_text(pom_text.replace("@KAFKA_VERSION@", KAFKA_VERSION))
    if paths.libs.exists():
        shutil.rmtree(paths.libs)
    command = [
        mvn,
        "-q",
        "-B",
        "-f",
        str(work / "pom.xml"),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={paths.libs}",
        "-DincludeScope=runtime",
    ]
    with log.open("ab") as out:
        result = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)
    if result.returncode != 0 or not any(paths.libs.glob("kafka_2.13-*.jar")):
        raise DevStackError(f"mvn could not resolve Kafka {KAFKA_VERSION}; see {log}")
    (paths.libs / _COMPLETE_MARKER).write_text(KAFKA_VERSION)


def write_config(paths: KafkaPaths, ports: PortPair) -> None:
    paths.data.mkdir(parents=True, exist_ok=True)
    properties = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{ports.controller}",
        "listeners": f"PLAINTEXT://127.0.0.1:{ports.client},CONTROLLER://127.0.0.1:{ports.controller}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{ports.client}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(paths.data),
        "num.partitions": "1",
        # A single node: internal topics must not ask for more replicas than exist.
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "12",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        # Tests create many groups; the default 3 s delay per new group adds up.
        "group.initial.rebalance.delay.ms": "0",
        # The consumer group protocol (KIP-848): a member that dies is noticed after 6 s
        # (default 45 s) and assignments converge within a second, as a dev stack should. A
        # member that joins gets partitions another member gives up only in a heartbeat's
        # answer: at 500 ms (the floor set here), the members a `tenantq worker --processes 2`
        # starts together share the partitions half a second after the first one has them
        # all (a second at 1,000 ms, 5 s at a broker's defaults).
        "group.consumer.min.session.timeout.ms": "6000",
        "group.consumer.session.timeout.ms": "6000",
        "group.consumer.min.heartbeat.interval.ms": "500",
        "group.consumer.heartbeat.interval.ms": "500",
        # A misspelt topic is an error, not a new topic.
        "auto.create.topics.enable": "false",
        "num.network.threads": "2",
        "num.io.threads": "4",
        # A removed topic's files go within a second, not a minute later (the default): the
        # cleanup after one test or load-test run must not land in the middle of the next.
        "file.delete.delay.ms": "1000",
        "log.segment.bytes": str(64 * 1024 * 1024),
        "log.retention.hours": "24",
    }
    paths.config.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))


def format_storage(java: str, paths: KafkaPaths) -> None:
    if (paths.data / "meta.properties").exists():
        return
    command = [
        java,
        "-cp",
        f"{paths.libs}/*",
        "kafka.tools.StorageTool",
        "format",
        "-t",
        str(uuid.uuid4()).replace("-", "")[:22],
        "-c",
        str(paths.config),
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    if result.returncode != 0:
        raise DevStackError(f"formatting Kafka storage failed: {result.stdout}{result.stderr}")


def start_broker(java: str, paths: KafkaPaths, heap: str = "768m") -> int:
    """Start the broker detached from this process; return its pid."""
    log4j = resources.files("tenantq.devstack").joinpath("log4j2.yaml")
    log4j_path = paths.config.parent / "log4j2.yaml"
    log4j_path.write_text(log4j.read_text())
    command = [
        java,
        f"-Xms{heap}",
        f"-Xmx{heap}",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log4j_path}",
        f"-Dtenantq.kafka.log={paths.log}",
        "-cp",
        f"{paths.libs}/*",
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


def broker_healthy(bootstrap: str, timeout: float = 2.0) -> bool:
    """True when the AdminClient sees a broker and the controller answers."""
    from confluent_kafka.admin import AdminClient

    # log_level 0: a broker that is still starting is expected, not worth a log line.
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 2000, "log_level": 0})
    try:
        metadata = admin.list_topics(timeout=timeout)
        return bool(metadata.brokers)
    except Exception:
        return False


def wait_for_broker(bootstrap: str, pid: int, paths: KafkaPaths, timeout: float) -> None:
    from tenantq.devstack.processes import pid_alive

    def ready() -> bool:
        if not pid_alive(pid):
            tail = paths.stdout.read_text(errors="replace")[-2000:] if paths.stdout.exists() else ""
            raise DevStackError(f"the Kafka broker exited during start-up:\n{tail}")
        return broker_healthy(bootstrap, timeout=1.0)

    if not wait_until(ready, timeout=timeout, interval=0.25):
        raise DevStackError(
            f"the Kafka broker did not answer within {timeout:.0f}s; see {paths.log}"
        )
