"""bench/settings.py with the admin and the database gauges' view, for bench/growth.py's rounds."""

from bench.admin_site import ADMIN_APPS, MIDDLEWARE, TEMPLATES  # noqa: F401
from bench.settings import *  # noqa: F403
from bench.settings import INSTALLED_APPS

INSTALLED_APPS = [*ADMIN_APPS, *INSTALLED_APPS]
ROOT_URLCONF = "bench.growth_urls"
ALLOWED_HOSTS = ["*"]
STATIC_URL = "/static/"
