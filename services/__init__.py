"""The app's background services: which services a ``tenantq worker`` runs beside its members.

This layer composes features (the outbox relay, the periodic scheduler, the retention pruner,
the hot-lane keeper); the loop they share (``tenantq.background.ServiceLoop``) lives in the
foundation, so the features import it without importing their composition."""
