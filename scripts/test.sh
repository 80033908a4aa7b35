#!/usr/bin/env bash
# Run the whole test suite on SQLite, PostgreSQL and MariaDB/MySQL, in a fresh-if-needed
# virtualenv (.venv). Usage: make test   (or: bash scripts/test.sh [pytest args])
#
# The three databases run at the same time, each in its own pytest process: most of the
# suite's time is spent waiting (on worker processes, leases, signals), not computing, so
# three sessions side by side take about as long as the slowest one. Each session's
# output goes to .test-logs/<database>.log and is printed when it ends.
# DBJOBS_TEST_SERIAL=1 runs them one after another instead, output streamed.
#
# DBJOBS_TEST_POSTGRES_URL / DBJOBS_TEST_MYSQL_URL pick the servers (defaults: the local
# ones). A database whose server does not answer is skipped and reported; with
# DBJOBS_REQUIRE_ALL_DATABASES=1 (CI sets it) a missing database is a failure.
set -u
cd "$(dirname "$0")/.."

PG_URL=${DBJOBS_TEST_POSTGRES_URL:-postgres://root@127.0.0.1:5432/dbjobs}
MY_URL=${DBJOBS_TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306/dbjobs}
REQUIRE_ALL=${DBJOBS_REQUIRE_ALL_DATABASES:-0}
SERIAL=${DBJOBS_TEST_SERIAL:-0}
# DBJOBS_TEST_DATABASES limits the run, e.g. "sqlite" (default: "sqlite postgres mysql").
DATABASES=" ${DBJOBS_TEST_DATABASES:-sqlite postgres mysql} "
LOGS=.test-logs

source scripts/venv.sh
# DBJOBS_TEST_EXTRAS adds extras, e.g. "test,postgres,tasks" for the django-tasks backport on Django 5.2.
ensure_venv "${DBJOBS_TEST_EXTRAS:-test,postgres}" || exit 1
if have_mysql_headers; then
  install_extra mysql || exit 1
fi

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }
host_port() { python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(p.hostname, p.port)' "$1"; }

declare -a results=() names=() pids=()
status=0
# Ctrl-C or a CI timeout stops the sessions running in the background too.
trap 'kill "${pids[@]}" 2>/dev/null; exit 130' INT TERM
started=$SECONDS
mkdir -p "$LOGS"

run_suite() {  # name url
  local name=$1 url=$2
  if [ "$SERIAL" = 1 ]; then
    echo
    echo "=== $name ==="
    DBJOBS_TEST_DATABASE_URL=$url "$VENV/bin/python" -m pytest "${PYTEST_ARGS[@]}"
    record "$name" $?
  else
    echo "$name: started (output in $LOGS/$name.log)"
    DBJOBS_TEST_DATABASE_URL=$url "$VENV/bin/python" -m pytest "${PYTEST_ARGS[@]}" >"$LOGS/$name.log" 2>&1 &
    names+=("$name")
    pids+=($!)
  fi
}
record() {  # name exit-status
  if [ "$2" -eq 0 ]; then results+=("$1: passed"); else results+=("$1: FAILED (pytest exit $2)"); status=1; fi
}
skip_suite() {  # name reason
  if [ "$REQUIRE_ALL" = 1 ]; then
    results+=("$1: FAILED, required but $2"); status=1
  else
    results+=("$1: skipped, $2")
  fi
}

PYTEST_ARGS=("$@")
echo "Django $("$VENV/bin/python" -c 'import django; print(django.get_version())') on $("$VENV/bin/python" --version)"
[[ $DATABASES == *" sqlite "* ]] && run_suite SQLite "sqlite:///$PWD/tests/dbjobs.sqlite3"

read -r host port <<<"$(host_port "$PG_URL")"
if [[ $DATABASES != *" postgres "* ]]; then :
elif port_open "$host" "${port:-5432}"; then run_suite PostgreSQL "$PG_URL"
else skip_suite PostgreSQL "no server answers at $host:${port:-5432}"; fi

read -r host port <<<"$(host_port "$MY_URL")"
if [[ $DATABASES != *" mysql "* ]]; then :
elif ! "$VENV/bin/python" -c "import MySQLdb" 2>/dev/null; then
  skip_suite MariaDB "mysqlclient is not installed (needs libmariadb-dev and pkg-config)"
elif port_open "$host" "${port:-3306}"; then run_suite MariaDB "$MY_URL"
else skip_suite MariaDB "no server answers at $host:${port:-3306}"; fi

# Print each session's output as it ends, in the order they end.
while [ ${#pids[@]} -gt 0 ]; do
  wait -n "${pids[@]}" 2>/dev/null
  for i in "${!pids[@]}"; do
    if ! kill -0 "${pids[$i]}" 2>/dev/null; then
      wait "${pids[$i]}"
      code=$?
      echo
      echo "=== ${names[$i]} ($(( SECONDS - started )) s) ==="
      cat "$LOGS/${names[$i]}.log"
      record "${names[$i]}" $code
      unset 'pids[i]' 'names[i]'
    fi
  done
  pids=("${pids[@]}") names=("${names[@]}")
done

echo
echo "=== Summary ($(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s) ==="
printf '%s\n' "${results[@]}"
if [ "${DBJOBS_TEST_RESTART_DATABASES:-0}" != 1 ]; then
  echo "Skipped: the tests that stop and start the database server (DBJOBS_TEST_RESTART_DATABASES=1 runs them)."
fi
exit $status
