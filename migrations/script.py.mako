"""${message}

Create Date: ${create_date}
"""

from __future__ import annotations

% if branch_labels or depends_on:
from collections.abc import Sequence

% endif
import sqlalchemy as sa
from alembic import op
${imports if imports else ""}

revision: str = ${repr(up_revision)}
down_revision: str | None = ${repr(down_revision)}
% if branch_labels:
branch_labels: str | Sequence[str] | None = ${repr(branch_labels)}
% endif
% if depends_on:
depends_on: str | Sequence[str] | None = ${repr(depends_on)}
% endif


def upgrade() -> None:
    ${upgrades if upgrades else "pass"}


def downgrade() -> None:
    ${downgrades if downgrades else "pass"}
