"""What tenantq exports: metric specs, worker metrics, bounded labels, queue stats and the
/metrics server."""
