"""The transactional outbox: enqueue inside the caller's own database transaction
(``tenantq.Outbox``), and the relay that publishes what committed (``tenantq outbox relay``,
and a background service of every ``tenantq worker``)."""
