"""``tenantq demo``: the whole system on this machine, with a checked verdict and a report."""
