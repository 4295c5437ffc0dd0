"""``tenantq web``: the on-call console (``pip install "tenantq[web]"``).

Server-rendered pages and a JSON API under ``/api/`` over the same lower layers the CLI uses:
``tenantq.store`` (all SQL), ``tenantq.dlq`` (the replay engine and its audit rows),
``tenantq.observability`` (consumer lag, tier depth) and ``tenantq.partitioner`` (placement).
It never imports the worker (``tenantq.consumer``).
"""
