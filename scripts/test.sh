#!/usr/bin/env bash
# Run the whole test suite on SQLite, PostgreSQL and MariaDB/MySQL, in a fresh-if-needed
# virtualenv (.venv). Usage: make test   (or: bash scripts/test.sh [pytest args])
#
# The databases run at the same time, each in two pytest processes with test databases of
# their own: one runs the chaos tests (CHAOS below: kill -9, frozen workers, supervisors,
# schedulers racing), which spend their time waiting on worker processes, leases and
# signals; the other runs the rest, which computes. Side by side they take about as long
# as the slowest one. Each session's output goes to .test-logs/<session>.log and is
# printed when it ends. Given test paths, each database runs them in one session.
# DBJOBS_TEST_SERIAL=1 runs one session per database, one after another, output streamed.
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
# The chaos tests: about half of each database's time, spent waiting.
CHAOS=(tests/test_supervisor.py tests/test_faults.py tests/test_reliability.py tests/test_scheduler.py tests/test_prefetch.py tests/test_workflow_workers.py
  tests/test_worker_metrics.py tests/test_prometheus_server.py tests/test_tracing_worker.py tests/test_dead_letter_causes.py
  tests/test_pgbouncer.py tests/test_resumable_workers.py tests/test_progress_worker.py tests/test_admin_progress_browser.py
  tests/test_idempotency_checker.py)

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
  elif [ "$PATHS_GIVEN" = 1 ]; then
    start_session "$name" "$url"
  else
    start_session "$name" "$url" "${CHAOS[@]/#/--ignore=}"
    start_session "$name-chaos" "$(chaos_database "$url")" "${CHAOS[@]}"
  fi
}
chaos_database() {  # url: the same server, another database name (SQLite's test file is per process)
  python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1])
print(p._replace(path=p.path + "_chaos").geturl() if p.scheme != "sqlite" else sys.argv[1])' "$1"
}
start_session() {  # name url [pytest args]
  local name=$1 url=$2
  shift 2
  echo "$name: started (output in $LOGS/$name.log)"
  # A test that restarts the server would cut the other session on it short: those run last.
  DBJOBS_TEST_DATABASE_URL=$url "$VENV/bin/python" -m pytest "${RESTARTS_LATER[@]}" "$@" "${PYTEST_ARGS[@]}" \
    >"$LOGS/$name.log" 2>&1 &
  names+=("$name")
  pids+=($!)
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
PATHS_GIVEN=0
for arg in "$@"; do [ -e "${arg%%::*}" ] && PATHS_GIVEN=1; done
RESTARTS=0
declare -a RESTARTS_LATER=() servers=()
if [ "${DBJOBS_TEST_RESTART_DATABASES:-0}" = 1 ] && [ "$SERIAL" != 1 ]; then
  RESTARTS=1
  RESTARTS_LATER=(-m "not restarts_database")
fi
echo "Django $("$VENV/bin/python" -c 'import django; print(django.get_version())') on $("$VENV/bin/python" --version)"
[[ $DATABASES == *" sqlite "* ]] && run_suite SQLite "sqlite:///$PWD/tests/dbjobs.sqlite3"

read -r host port <<<"$(host_port "$PG_URL")"
if [[ $DATABASES != *" postgres "* ]]; then :
elif port_open "$host" "${port:-5432}"; then run_suite PostgreSQL "$PG_URL"; servers+=("PostgreSQL=$PG_URL")
else skip_suite PostgreSQL "no server answers at $host:${port:-5432}"; fi

read -r host port <<<"$(host_port "$MY_URL")"
if [[ $DATABASES != *" mysql "* ]]; then :
elif ! "$VENV/bin/python" -c "import MySQLdb" 2>/dev/null; then
  skip_suite MariaDB "mysqlclient is not installed (needs libmariadb-dev and pkg-config)"
elif port_open "$host" "${port:-3306}"; then run_suite MariaDB "$MY_URL"; servers+=("MariaDB=$MY_URL")
else skip_suite MariaDB "no server answers at $host:${port:-3306}"; fi

# Print each session's output as it ends, in the order they end (a look a second: any bash).
while [ ${#pids[@]} -gt 0 ]; do
  sleep 1
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

# The tests that restart a server, one server at a time, once nothing else runs on it.
if [ "$RESTARTS" = 1 ]; then
  for server in "${servers[@]}"; do
    name=${server%%=*}-restarts
    echo
    echo "=== $name ==="
    DBJOBS_TEST_DATABASE_URL=${server#*=} "$VENV/bin/python" -m pytest -m restarts_database "${PYTEST_ARGS[@]}"
    code=$?
    [ $code -eq 5 ] && code=0  # none selected (test paths given without one)
    record "$name" $code
  done
fi

echo
echo "=== Summary ($(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s) ==="
printf '%s\n' "${results[@]}"
if [ "${DBJOBS_TEST_RESTART_DATABASES:-0}" != 1 ]; then
  echo "Skipped: the tests that stop and start the database server (DBJOBS_TEST_RESTART_DATABASES=1 runs them)."
fi
exit $status
