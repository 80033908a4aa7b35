"""The app's configuration: when Django is ready, it registers the system checks and wires the schedules."""

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class DbJobsConfig(AppConfig):
    name = "django_dbjobs"
    verbose_name = _("Background jobs")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401 - registers the system checks
        from .schedules import services

        services.connect()
