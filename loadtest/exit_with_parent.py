"""Processes the load tools start end when the tool's process dies.

A tool killed by a signal, or crashed in a client library, runs no cleanup; its workers, in
sessions of their own (so that a Ctrl-C reaches the tool alone, which stops them once,
gracefully), would go on draining topics and skew the next run's figures.
"""

from __future__ import annotations

import os
import sys

#: The first program of such a process: it asks the kernel to send it SIGTERM when the tool's
#: process dies (``PR_SET_PDEATHSIG``, Linux; it outlives the ``exec``), then becomes the
#: command, under the same pid. The signal is sent when the *thread* that started the process
#: ends, so processes are started from the tool's main thread.
EXIT_WITH_PARENT = """
import ctypes, os, signal, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
except AttributeError:
    pass  # no prctl here: the process outlives a tool that dies, as before
if os.getppid() != int(sys.argv[1]):
    sys.exit("the tool ended before this process started")
os.execvp(sys.argv[2], sys.argv[2:])
"""


def exiting_with_this_process(command: list[str]) -> list[str]:
    """``command``, run through the launcher that ends it when this process dies."""
    return [sys.executable, "-c", EXIT_WITH_PARENT, str(os.getpid()), *command]
