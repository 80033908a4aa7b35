"""Cron arithmetic, pure and free of the database: expressions, their fields, missed due times.

Below the models (a Schedule validates its expression with it); the schedules that
use it, and the scheduler that fires them, are in ``schedules/``.
"""
