"""Claiming: which jobs a worker takes and when (prefetch, paused and rate-limited queues,
admissions of keyed jobs), and what it holds until they end."""
