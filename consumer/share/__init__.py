"""A spike, not a product mode: the worker's parts over a Kafka share group (KIP-932).

``ShareWorker`` consumes a queue's main topic through confluent-kafka's preview
``ShareConsumer`` with the same Postgres leases and fencing as the consumer-group worker;
acknowledgements (ACCEPT, RELEASE) take the place of committed offsets and of rebalance
handling. It is not part of the public facade and has no ``tenantq`` command: it exists to be
measured beside the consumer-group worker (``python -m tenantq.consumer.share``, the loadtest
options ``--worker share``). What it gives, what it costs and what the client still lacks:
``docs/share-groups.md``.
"""
