"""Periodic jobs: schedules declared with ``app.periodic(...)`` (``every`` seconds or a
five-field ``cron`` expression), enqueued once per tick by the schedulers that run inside
every ``tenantq worker``; ``tenantq periodic list`` shows them."""
