"""CPU time of process groups (a worker and its descendants, the Kafka broker, PostgreSQL),
read from ``/proc/<pid>/stat`` by a sampler thread, and the CPU spent between two moments.

How a group's CPU is counted, so that processes that come and go are not lost:

* every sample reads utime + stime of each live process of the group, plus cutime + cstime
  (the CPU of its children that ended and that it reaped) for processes that reap their
  own: the root of a process tree and every process in it, and the postmaster. A process
  that ends between two samples moves its CPU into its parent's cutime, so the group's sum
  still holds it: the CPU between samples A and B is ``sum(B) - sum(A)`` over all pids seen
  in either (a pid missing from one side counts 0 there). Per-role figures follow the same
  rule, so the CPU of an ended process shows up under the role of its reaper;
* what is missed: a process reaped by a process outside the group (re-parented to init), a
  process that starts and ends between two membership reads, and the race of a child that
  ends between the read of its parent and its own read (microseconds). Values come in clock
  ticks (``SC_CLK_TCK``, 10 ms on Linux): each process read is exact to one tick.

The sampler runs in the benchmark's process, reads about 1 + 30-60 small files per sample
(one ``children`` file per process tree level, one ``stat`` per process) every
``interval`` seconds: ~1 ms of CPU per sample, none of it in a measured group.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")
#: A process's role in its group, from its command line.
Labeler = Callable[[int, str], str]


def read_ticks(pid: int, *, with_reaped: bool) -> int | None:
    """utime + stime of ``pid`` (plus cutime + cstime when ``with_reaped``), in clock ticks;
    None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: fields start after the last ")".
    fields = data[data.rindex(b")") + 2 :].split()
    used = int(fields[11]) + int(fields[12])
    return used + int(fields[13]) + int(fields[14]) if with_reaped else used


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except (OSError, UnicodeDecodeError):
        return ""


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (each thread keeps its own list of the children it forked)."""
    found: list[int] = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for thread in threads:
        try:
            with open(f"/proc/{pid}/task/{thread}/children", "rb") as listing:
                found += [int(child) for child in listing.read().split()]
        except OSError:
            continue
    return found


class ProcessGroup:
    """A named set of processes: ``members()`` is called at every sample."""

    name: str
    #: Whether each member's reaped children count in its figure (see the module docstring).
    with_reaped: bool = True

    def members(self) -> Iterable[int]:
        raise NotImplementedError

    def label(self, pid: int, cmdline: str) -> str:
        return self.name


class SingleProcess(ProcessGroup):
    """One process that starts no others (the JVM of the broker)."""

    def __init__(self, name: str, pid: int) -> None:
        self.name = name
        self.pid = pid

    def members(self) -> Iterable[int]:
        return (self.pid,)


class ProcessTree(ProcessGroup):
    """Processes (``roots``) and all their descendants; membership is re-read every
    ``refresh`` seconds (walking the tree reads one file per thread: a worker has dozens)."""

    def __init__(self, name: str, roots: list[int], labeler: Labeler, refresh: float = 1.0) -> None:
        self.name = name
        self.roots = roots
        self._labeler = labeler
        self._refresh = refresh
        self._members: list[int] = list(roots)
        self._read_at = 0.0

    def members(self) -> Iterable[int]:
        now = time.monotonic()
        if now - self._read_at >= self._refresh:
            self._read_at = now
            tree, waiting = [], list(self.roots)
            while waiting:
                pid = waiting.pop()
                tree.append(pid)
                waiting += children(pid)
            self._members = tree
        return self._members

    def label(self, pid: int, cmdline: str) -> str:
        return self._labeler(pid, cmdline)


class Postmaster(ProcessGroup):
    """PostgreSQL: the postmaster (with the CPU of the backends it reaped) and every process
    whose parent it is, read at every sample (one file: the postmaster has one thread).
    ``excluded`` pids (the benchmark's own connections) are left out."""

    with_reaped = False

    def __init__(self, name: str, pid: int, labeler: Labeler, own_role: str) -> None:
        self.name = name
        self.pid = pid
        self._labeler = labeler
        #: The role of the postmaster itself (and so of the backends that ended).
        self.own_role = own_role
        self.excluded: set[int] = set()

    def members(self) -> Iterable[int]:
        try:
            with open(f"/proc/{self.pid}/task/{self.pid}/children", "rb") as listing:
                found = [int(child) for child in listing.read().split()]
        except OSError:
            found = []
        return [pid for pid in found if pid not in self.excluded]

    def label(self, pid: int, cmdline: str) -> str:
        return self._labeler(pid, cmdline)


@dataclass
class CpuWindow:
    """CPU seconds of each group and of each (group, role) between two samples."""

    started: float
    ended: float
    by_group: dict[str, float]
    by_role: dict[tuple[str, str], float]


@dataclass
class _Sample:
    at: float
    ticks: dict[int, int]


@dataclass
class CpuSampler:
    """Samples ``groups`` every ``interval`` seconds in a daemon thread until ``stop()``."""

    groups: list[ProcessGroup]
    interval: float = 0.1
    samples: list[_Sample] = field(default_factory=list)
    #: pid -> (group name, role), fixed when the pid is first seen (``relabel`` may refine).
    roles: dict[int, tuple[str, str]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, group: ProcessGroup) -> None:
        """Sample ``group`` too from the next sample on (a worker started after the sampler,
        which first measured the servers' background)."""
        with self._lock:
            self.groups = [*self.groups, group]

    def start(self) -> CpuSampler:
        self._thread = threading.Thread(target=self._run, name="bench-cpu", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def relabel(self, pid: int, group: str, role: str) -> None:
        """Name the role of ``pid`` in ``group`` (seen yet or not): what its command line does
        not say, such as a database connection's application name."""
        with self._lock:
            self.roles[pid] = (group, role)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def sample(self) -> None:
        at = time.time()  # the wall clock: the database stamps jobs with the same clock
        ticks: dict[int, int] = {}
        with self._lock:
            groups = self.groups
        for group in groups:
            # The postmaster itself: with the CPU of the backends it reaped.
            if isinstance(group, Postmaster):
                value = read_ticks(group.pid, with_reaped=True)
                if value is not None:
                    ticks[group.pid] = value
                    self._remember(group, group.pid, role=group.own_role)
            for pid in group.members():
                value = read_ticks(pid, with_reaped=group.with_reaped)
                if value is not None:
                    ticks[pid] = value
                    self._remember(group, pid)
        with self._lock:
            self.samples.append(_Sample(at, ticks))

    def _remember(self, group: ProcessGroup, pid: int, role: str | None = None) -> None:
        if pid not in self.roles:
            with self._lock:
                self.roles[pid] = (group.name, role or group.label(pid, command_line(pid)))

    def window(self, started: float, ended: float) -> CpuWindow | None:
        """The CPU between the first sample at or after ``started`` and the last one at or
        before ``ended`` (None when fewer than two samples fall inside)."""
        with self._lock:
            samples = list(self.samples)
            roles = dict(self.roles)
        moments = [sample.at for sample in samples]
        first = bisect.bisect_left(moments, started)
        last = bisect.bisect_right(moments, ended) - 1
        if last <= first:
            return None
        before, after = samples[first], samples[last]
        by_group: dict[str, float] = {}
        by_role: dict[tuple[str, str], float] = {}
        for pid in before.ticks.keys() | after.ticks.keys():
            seconds = (after.ticks.get(pid, 0) - before.ticks.get(pid, 0)) / TICKS_PER_SECOND
            group, role = roles.get(pid, ("?", "?"))
            by_group[group] = by_group.get(group, 0.0) + seconds
            by_role[(group, role)] = by_role.get((group, role), 0.0) + seconds
        return CpuWindow(before.at, after.at, by_group, by_role)
