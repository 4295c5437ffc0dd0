"""Who makes a change from this process, for the ``updated_by`` of the rows an operator
changes (tenant limits, placements)."""

from __future__ import annotations

import getpass
import socket


def operator_name() -> str:
    """``user@host`` of this process (``unknown@host`` where there is no login name)."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name in some containers
        user = "unknown"
    return f"{user}@{socket.gethostname()}"
