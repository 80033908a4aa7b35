"""Observability: traces from the enqueuer into the job, metrics, failures grouped by cause, log fields."""
