"""``python -m tenantq.consumer.share MODULE:APP``: one share-group member (the spike; not a
``tenantq`` command). Settings come from ``TENANTQ_*`` as for ``tenantq worker``."""

from __future__ import annotations

import argparse
import sys

from tenantq.app import load_app
from tenantq.consumer.share.group import ShareGroupOptions
from tenantq.consumer.share.worker import ShareWorker
from tenantq.log import configure_logging
from tenantq.settings import load_settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tenantq.consumer.share",
        description="Run one share-group member over the queues' main topics (a spike).",
    )
    parser.add_argument("app", metavar="MODULE:APP")
    parser.add_argument("--queues", help="comma-separated queues (default: the app's)")
    parser.add_argument("--concurrency", type=int, help="handler slots")
    parser.add_argument("--worker-id")
    parser.add_argument(
        "--lock-seconds", type=float, help="the group's record lock (broker default: 30 s)"
    )
    parser.add_argument(
        "--delivery-limit", type=int, help="deliveries per record (broker default: 5)"
    )
    parser.add_argument(
        "--max-poll-records", type=int, help="records per poll (default: twice the slots)"
    )
    arguments = parser.parse_args(argv)
    settings = load_settings()
    configure_logging(settings.log_level)
    app = load_app(arguments.app)
    queues = [q.strip() for q in arguments.queues.split(",")] if arguments.queues else None
    for name in queues or []:
        settings.queue(name)
    worker = ShareWorker(
        app,
        queues,
        settings=settings,
        concurrency=arguments.concurrency,
        worker_id=arguments.worker_id,
        app_reference=arguments.app,
        group=ShareGroupOptions(
            lock_seconds=arguments.lock_seconds,
            delivery_limit=arguments.delivery_limit,
            max_poll_records=arguments.max_poll_records,
        ),
    )
    worker.run()
    return worker.exit_code


if __name__ == "__main__":
    sys.exit(main())
