#!/usr/bin/env bash
# Run the example project's demo on SQLite: migrate, enqueue demo jobs, drain them.
# make package runs it on the installed wheel: DBJOBS_DEMO_PYTHON is then the Python of a
# fresh virtualenv (default: .venv's, with the checkout installed), and DBJOBS_DEMO_PROJECT
# a copy of example_project outside the checkout (default: example_project).
set -eu
cd "$(dirname "$0")/.."
if [ -n "${DBJOBS_DEMO_PYTHON:-}" ]; then
  python=$DBJOBS_DEMO_PYTHON
else
  source scripts/venv.sh
  ensure_venv "example"
  python=$(cd "$VENV" && pwd)/bin/python
fi
cd "${DBJOBS_DEMO_PROJECT:-example_project}"
export DATABASE_URL=${DATABASE_URL:-sqlite:///$PWD/db.sqlite3}
"$python" manage.py migrate --verbosity 0
"$python" manage.py demo
