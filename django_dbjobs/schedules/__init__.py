"""Cron schedules: definitions and their sync from settings, the scheduler, firing, the report.

The cron arithmetic they use is in ``cron/``; the tables in ``models/schedule.py``.
"""
