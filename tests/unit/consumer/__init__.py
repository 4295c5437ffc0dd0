"""A package only because tests/integration has a test_circuit_breaker.py too: in pytest's
default (prepend) import mode both would be the same top-level module."""
