"""Reads a queue's Kafka backlog over and over with one ``BacklogProbe`` shared by a few
threads, as the web console's requests share it, until a stop file appears; prints each
reading as a JSON line. Run as its own process by ``test_backlog_probe_broker_restart``: a
client library that aborts takes this process with it, not the test session.

Usage: python backlog_probe_loop.py QUEUE STOP_FILE (settings from the TENANTQ_* variables)
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import tenantq
from tenantq.observability.consumer_lag import BacklogProbe

READERS = 4


def main() -> None:
    queue, stop_file = sys.argv[1], Path(sys.argv[2])
    probe = BacklogProbe(tenantq.load_settings(), timeout=2.0)
    printing = threading.Lock()

    def read() -> None:
        while not stop_file.exists():
            backlog = probe.queue_backlog(queue)
            line = json.dumps({"lag": backlog.as_dict()["consumer_lag"], "error": backlog.error})
            with printing:
                print(line, flush=True)

    readers = [threading.Thread(target=read, name=f"reader-{n}") for n in range(READERS)]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join()
    probe.close()
    print(json.dumps({"stopped": True}), flush=True)


if __name__ == "__main__":
    main()
