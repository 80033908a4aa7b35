"""Overview: a proxy of Job that gives the admin's overview page its place in the app index."""

from django.utils.translation import gettext_lazy as _

from .job import Job


class Overview(Job):
    """No rows of its own: the admin shows the queues and the last hour's throughput."""

    class Meta:
        proxy = True
        verbose_name = _("overview")
        verbose_name_plural = _("overview")
        default_permissions = ()
