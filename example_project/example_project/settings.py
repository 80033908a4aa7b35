"""Settings for the example project; everything that varies comes from the environment.

DATABASE_URL picks the database (default: SQLite in this folder), for example
postgres://user@127.0.0.1:5432/dbjobs_example or mysql://root@127.0.0.1:3306/dbjobs_example.
"""

from pathlib import Path

import environ

from django_dbjobs.db import SQLITE_RECOMMENDED_OPTIONS

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env")

SECRET_KEY = env("SECRET_KEY", default="example-only-change-me")
DEBUG = env.bool("DEBUG", default=True)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_dbjobs",
    "demo",
    "shop",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

ROOT_URLCONF = "example_project.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
WSGI_APPLICATION = "example_project.wsgi.application"

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # WAL, a busy timeout and BEGIN IMMEDIATE: see docs/installation.rst.
    DATABASES["default"]["OPTIONS"] = dict(SQLITE_RECOMMENDED_OPTIONS)
elif DATABASES["default"]["ENGINE"].endswith("mysql"):
    DATABASES["default"].setdefault("OPTIONS", {})["charset"] = "utf8mb4"

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
STATIC_URL = "static/"

# Receipts are printed by the worker (the console backend) unless EMAIL_BACKEND says otherwise,
# e.g. django.core.mail.backends.smtp.EmailBackend with EMAIL_HOST and EMAIL_PORT.
EMAIL_BACKEND = env("EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env("EMAIL_HOST", default="localhost")
EMAIL_PORT = env.int("EMAIL_PORT", default=25)
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="shop@example.com")
# The day the shop's daily sales summary covers starts at midnight here.
SHOP_TIMEZONE = env("SHOP_TIMEZONE", default="Europe/Paris")

DBJOBS_QUEUES = ["default", "emails", "reports"]
DBJOBS_RETRY_BACKOFF = env.float("DBJOBS_RETRY_BACKOFF", default=0.2)
DBJOBS_POLL_INTERVAL = env.float("DBJOBS_POLL_INTERVAL", default=1.0)

# Cron schedules: every run_jobs also schedules; `manage.py dbjobs_schedules` lists them.
DBJOBS_SCHEDULES = {
    "nightly-summary": {
        "job": "demo.jobs.nightly_summary",
        "cron": env("NIGHTLY_SUMMARY_CRON", default="30 2 * * *"),
        "timezone": env("NIGHTLY_SUMMARY_TIMEZONE", default="Europe/Paris"),
        "due_time_argument": "due_time",
    },
    "daily-sales": {
        "job": "shop.jobs.daily_sales",
        "cron": "0 7 * * *",
        "timezone": SHOP_TIMEZONE,
        "due_time_argument": "due_time",
    },
}
