"""Test tiers are folders: unit/ (no servers), integration/ (the real Kafka broker and
PostgreSQL), packaging/ (the built wheel in a clean virtual environment)."""
