"""Test tiers are folders: unit/ (no servers), integration/ (the real Kafka broker and
PostgreSQL), packaging/ (the built wheel in a clean virtual environment).

unit/ mirrors the source: the tests of ``tenantq.<package>.<module>`` are in
``unit/<package>/test_<module>.py`` (``unit/core/`` for the top-level ``tenantq`` modules).
The test doubles they share are in ``fakes.py``, next to this file: pytest puts this folder
on ``sys.path`` when it loads this conftest (its default "prepend" import mode, this folder
having no ``__init__.py``), so every test imports them as ``fakes``."""
