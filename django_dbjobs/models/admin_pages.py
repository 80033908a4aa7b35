"""Proxies of Job that give the admin's pages with no table of their own a place in the app index."""

from django.utils.translation import gettext_lazy as _

from .job import Job


class Overview(Job):
    """No rows of its own: the admin shows the queues and the last hour's throughput."""

    class Meta:
        proxy = True
        verbose_name = _("overview")
        verbose_name_plural = _("overview")
        default_permissions = ()


class FailureGroup(Job):
    """No rows of its own: the admin lists the dead letters grouped by cause (admin/failure_groups.py)."""

    class Meta:
        proxy = True
        verbose_name = _("failure cause")
        verbose_name_plural = _("dead letters by cause")
        default_permissions = ()
