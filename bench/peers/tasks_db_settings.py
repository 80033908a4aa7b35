"""Django settings of django-tasks-db in the side-by-side benchmark (BENCH_PEER_DSN: the scratch database).

Connections are kept (CONN_MAX_AGE=None): with Django's default of 0 its worker
reconnects on every pass and drains about half as fast.
"""

import os
from urllib.parse import urlsplit

_url = urlsplit(os.environ["BENCH_PEER_DSN"])
SECRET_KEY = "bench"
DEBUG = False
USE_TZ = True
INSTALLED_APPS = ["django_tasks_db"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _url.path.lstrip("/"),
        "USER": _url.username or "",
        "PASSWORD": _url.password or "",
        "HOST": _url.hostname or "",
        "PORT": str(_url.port or ""),
        "CONN_MAX_AGE": None,
    }
}
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
