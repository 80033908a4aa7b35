"""The worker (``run_jobs``): its loop, and the parts the loop drives.

``Worker`` is imported on first use: settings modules import parts of this package
(``worker.supervisor``) before Django's apps are ready, and the loop needs the models.
"""

__all__ = ["Worker"]


def __getattr__(name):
    if name == "Worker":
        from .lifecycle.loop import Worker

        return Worker
    raise AttributeError(f"module 'django_dbjobs.worker' has no attribute {name!r}")
