"""Sphinx configuration: the pages, and autodoc for the API reference (reference/api.rst)."""

import sys
from pathlib import Path

import django
from django.conf import settings

# The checkout's package, not an installed one (make docs installs it editable anyway).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import django_dbjobs  # noqa: E402

# autodoc imports the public modules, which import the models: a minimal project does.
if not settings.configured:
    settings.configure(
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "django_dbjobs"],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        USE_TZ=True,
    )
    django.setup()

project = "django-dbjobs"
author = "django-dbjobs developers"
release = django_dbjobs.__version__
version = ".".join(release.split(".")[:2])
extensions = ["sphinx.ext.autodoc"]
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
exclude_patterns = ["_build"]
html_theme = "alabaster"
