"""usage rows stay on their page: tenantq_tenant_usage keeps nine tenths of each page free

Every limited claim rewrites the usage row of each cap or rate it applies, under the row's
lock, thousands of times a second across a fleet. The new version of a row can stay on its
page (a HOT update: no index entry, no new page) only while the page has room for it, and the
versions that claims, results and readers of the last few milliseconds may still see cannot be
pruned yet. Packed full, a page of some fifty rows filled up within a few claims: measured with
two claimers of 100 rows each and a reader, 5-91 % of the updates were HOT, the table grew to
2.6-8 MB for 200 rows and an update of 100 rows took 0.55-4.1 ms of the server; at a
fillfactor of 10 (about five rows per page), 99.9-100 % HOT, 0.25-0.5 MB, 0.5 ms. A table of
a row per cap or rate of each tenant is small at any fillfactor.

Rows already packed move to pages with room as they are next updated off a full page.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-09 12:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

USAGE = "tenantq_tenant_usage"


def upgrade() -> None:
    op.execute(f"ALTER TABLE {USAGE} SET (fillfactor = 10)")


def downgrade() -> None:
    op.execute(f"ALTER TABLE {USAGE} RESET (fillfactor)")
