#!/usr/bin/env bash
# Run the example project's demo on SQLite: migrate, enqueue demo jobs, drain them.
set -eu
cd "$(dirname "$0")/.."
source scripts/venv.sh
ensure_venv "example"
cd example_project
export DATABASE_URL=${DATABASE_URL:-sqlite:///$PWD/db.sqlite3}
"../$VENV/bin/python" manage.py migrate --verbosity 0
"../$VENV/bin/python" manage.py demo
