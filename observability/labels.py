"""Bounded label values, so that no input can multiply the series of a scrape.

A label value that comes from data (a tenant id, an error class, a dead-letter reason) is
mapped through a ``BoundedLabel``: the first ``limit`` distinct valid values keep their own
label for the life of the process, everything else shares ``other``. First-come is simple,
deterministic and never relabels a live series; ``preload`` lets a process start with the
tenants that Postgres says carry the most volume (a worker does it at start,
``tenantq.observability.worker.busiest_tenants``), so the labelled set is the busy set rather
than whoever happened to arrive first.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable

#: The shared label of every value past the bound (and of every invalid value).
OTHER = "other"
#: How many values past the bound a ``BoundedLabel`` remembers as ``other``.
OTHERS_REMEMBERED = 10_000

#: The tenant id rule of ``tenantq.tenant_ids``, repeated here as a pattern so that
#: metrics never import the partitioner; a unit test keeps the two in step.
_TENANT_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
#: Error classes are dotted Python names; reasons are short identifiers.
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,127}")


def is_tenant_label(value: object) -> bool:
    """True if ``value`` is a valid tenant id, the only tenant strings allowed as labels."""
    return isinstance(value, str) and _TENANT_ID.fullmatch(value) is not None


def is_identifier_label(value: object) -> bool:
    """True if ``value`` looks like an error class or reason (``TimeoutError``, ``http.429``)."""
    return isinstance(value, str) and _IDENTIFIER.fullmatch(value) is not None


class BoundedLabel:
    """Maps values to at most ``limit`` distinct labels plus ``other``. Thread-safe."""

    def __init__(self, limit: int, is_valid: Callable[[object], bool]) -> None:
        if limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        self._limit = limit
        self._is_valid = is_valid
        self._labelled: set[str] = set()
        #: Valid values found past the bound: ``other`` without the check and the lock next
        #: time (a worker asks once per job). Cleared when it reaches ``OTHERS_REMEMBERED``.
        self._others: set[str] = set()
        self._lock = threading.Lock()

    @property
    def limit(self) -> int:
        """How many values may keep their own label."""
        return self._limit

    def labelled(self) -> frozenset[str]:
        """The values that have their own label so far."""
        with self._lock:
            return frozenset(self._labelled)

    def preload(self, values: Iterable[str]) -> None:
        """Give labels to ``values`` first, in order, while free slots remain."""
        for value in values:
            self.label(value)

    def label(self, value: object) -> str:
        """The label for ``value``: itself if it is valid and labelled (or a slot is free),
        else ``other``."""
        # Lock-free fast paths: only valid values enter either set, and the labelled set only
        # grows, so a hit stays a hit.
        if type(value) is str:
            if value in self._labelled:
                return value
            if value in self._others:
                return OTHER
        if not self._is_valid(value):
            return OTHER
        assert isinstance(value, str)
        with self._lock:
            if value in self._labelled:
                return value
            if len(self._labelled) >= self._limit:
                if len(self._others) >= OTHERS_REMEMBERED:
                    self._others = set()
                self._others.add(value)
                return OTHER
            self._labelled.add(value)
            return value


class TenantLabeler(BoundedLabel):
    """Tenant labels: the first ``top_n`` distinct valid tenant ids (after any ``preload``)
    keep their own label; every other tenant, and every invalid string, is ``other``.

    A tenant literally named ``other`` shares the ``other`` series, which is the right
    reading of it anyway.
    """

    def __init__(self, top_n: int = 20) -> None:
        super().__init__(top_n, is_tenant_label)
