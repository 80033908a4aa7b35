#!/usr/bin/env bash
# The side-by-side benchmark: each peer queue in its own virtualenv under .bench-venvs/
# (never a dependency of django-dbjobs), then bench/peers/compare.py from .venv.
#   bash scripts/bench_peers.sh --venvs-only     # just install the peers
#   bash scripts/bench_peers.sh --runs 5 --json peers.json
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh

# The versions the published table was measured with.
declare -A PEERS=(
  [pgqueuer]="pgqueuer==1.6.0 asyncpg==0.32.0"
  [procrastinate]="procrastinate==3.10.0 psycopg[binary]==3.3.9"
  [tasks-db]="django-tasks-db==0.13.0 Django==6.1.3 psycopg[binary]==3.3.9"
)

# The peers run on the interpreter django-dbjobs runs on (.venv's), for a like-for-like table.
ensure_venv "postgres"
python="$VENV/bin/python"
for name in "${!PEERS[@]}"; do
  venv=.bench-venvs/$name
  stamp="$venv/.installed-$($python -c 'import platform; print(platform.python_version())')-$(echo "${PEERS[$name]}" | tr ' =[]' '____')"
  if [ ! -f "$stamp" ]; then
    echo "Installing ${PEERS[$name]} into $venv"
    rm -rf "$venv"
    $python -m venv "$venv"
    "$venv/bin/python" -m pip install -q ${PEERS[$name]}
    touch "$stamp"
  fi
done
[ "${1:-}" = "--venvs-only" ] && exit 0

exec "$VENV/bin/python" bench/peers/compare.py "$@"
