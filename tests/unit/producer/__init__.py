"""A package only because tests/integration has a test_producer.py too: in pytest's
default (prepend) import mode both would be the same top-level module."""
