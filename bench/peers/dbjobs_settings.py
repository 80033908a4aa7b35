"""Django settings of django-dbjobs in the side-by-side benchmark (BENCH_PEER_DSN: the scratch database)."""

import os

import environ

SECRET_KEY = "bench"
USE_TZ = True
INSTALLED_APPS = ["django_dbjobs"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
DATABASES = {"default": environ.Env.db_url_config(os.environ["BENCH_PEER_DSN"])}
DBJOBS_JOB_MODULES = ["dbjobs_jobs"]
