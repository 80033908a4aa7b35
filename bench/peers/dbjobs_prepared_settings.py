"""django-dbjobs in the side-by-side benchmark with prepared statements allowed
(``"prepare_threshold"`` in OPTIONS: Django turns them off by default for connection poolers)."""

from dbjobs_settings import *  # noqa: F403

DATABASES["default"]["OPTIONS"] = {"prepare_threshold": 5}  # noqa: F405
