"""``python -m tenantq.cli``."""

from tenantq.cli import main

main()
