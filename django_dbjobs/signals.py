"""Signals sent as jobs move through the queue.

Every signal is sent with ``sender=Job`` and ``job=<the Job>``; job_finished also
has ``status`` and job_failed ``error`` (the last error's record).
"""

from django.dispatch import Signal

#: After a job's row is written, inside the caller's transaction.
job_enqueued = Signal()
#: In the worker thread, just before the job's function is called.
job_started = Signal()
#: After the outcome of an attempt is stored (SUCCESSFUL, READY for a retry, FAILED).
job_finished = Signal()
#: After a job is moved to FAILED: its attempts are spent (the dead-letter list).
job_failed = Signal()
