"""The dead-letter topic as one feature: its records, reader, filters, replay, pacing and purge."""
