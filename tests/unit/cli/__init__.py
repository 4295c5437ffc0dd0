"""A package only because tests/integration has a test_stats.py too: in pytest's
default (prepend) import mode both would be the same top-level module."""
