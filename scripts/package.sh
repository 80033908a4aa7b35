#!/usr/bin/env bash
# Build the sdist and wheel into dist/, check them (metadata renders, the app's files are
# in, tests are out, the version is __version__), then install the wheel into a throwaway
# virtualenv and run two projects on it, on SQLite: a minimal one (check, migrate, a job
# through run_jobs --burst), then a copy of the example project's demo (make demo).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
source scripts/venv.sh
ensure_venv "test"
"$VENV/bin/python" -m pip install -q build twine
rm -rf dist build
"$VENV/bin/python" -m build -q --outdir dist . >/dev/null
"$VENV/bin/python" -m twine check --strict dist/*
"$VENV/bin/python" scripts/check_package.py dist

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
python=$(pick_python)
$python -m venv "$scratch/venv"
# [example]: django-environ, which the example project's settings read.
"$scratch/venv/bin/python" -m pip install -q "$(ls "$root"/dist/*.whl)[example]"
"$scratch/venv/bin/python" -m pip check
mkdir -p "$scratch/project/shop"
cat > "$scratch/project/settings.py" <<'PY'
SECRET_KEY = "package-check"
USE_TZ = True
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "django_dbjobs", "shop"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3",
    "OPTIONS": {"transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"}}}
PY
touch "$scratch/project/shop/__init__.py"
cat > "$scratch/project/shop/jobs.py" <<'PY'
from django_dbjobs import job

@job
def add(a, b):
    return a + b
PY
cd "$scratch/project"
export DJANGO_SETTINGS_MODULE=settings PYTHONPATH=.
"$scratch/venv/bin/python" -m django check
"$scratch/venv/bin/python" -m django migrate -v 0
"$scratch/venv/bin/python" -c "
import django; django.setup()
from django_dbjobs import enqueue
from shop.jobs import add
print('enqueued', enqueue(add, 2, 3).pk)"
"$scratch/venv/bin/python" -m django run_jobs --burst -v 0
"$scratch/venv/bin/python" -c "
import django; django.setup()
from django_dbjobs.models import Job
job = Job.objects.get()
assert (job.status, job.return_value) == ('SUCCESSFUL', 5), (job.status, job.return_value)
print('OK: the installed wheel ran a job:', job.status, job.return_value)"

# The demo, from a copy of example_project outside the checkout: only the wheel's
# django_dbjobs can be imported there.
cp -r "$root/example_project" "$scratch/example_project"
rm -f "$scratch"/example_project/db.sqlite3* "$scratch/example_project/.env"
cd "$scratch/example_project"
unset DJANGO_SETTINGS_MODULE PYTHONPATH
"$scratch/venv/bin/python" -c "
import django_dbjobs, sys
assert django_dbjobs.__file__.startswith(sys.prefix), django_dbjobs.__file__
print('django_dbjobs', django_dbjobs.__version__, 'from', django_dbjobs.__file__)"
DBJOBS_DEMO_PYTHON="$scratch/venv/bin/python" DBJOBS_DEMO_PROJECT="$scratch/example_project" \
  DATABASE_URL="sqlite:///$scratch/example_project/db.sqlite3" bash "$root/scripts/demo.sh" | tee "$scratch/demo.out"
grep -q " 0 left\.$" "$scratch/demo.out" || { echo "the demo left jobs unfinished" >&2; exit 1; }
echo "OK: the example project's demo ran on the installed wheel"
