#!/usr/bin/env bash
# A tiny run of the benchmark on each database (make bench-smoke; CI keeps it working).
# A server that does not answer is skipped; DBJOBS_REQUIRE_ALL_DATABASES=1 (CI) makes that a failure.
set -u
cd "$(dirname "$0")/.."
source scripts/venv.sh
ensure_venv "test,postgres" || exit 1
if have_mysql_headers; then install_extra mysql || exit 1; fi
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
status=0
run() {  # name port url
  if [ -n "$2" ] && ! port_open "$2"; then
    echo "bench-smoke $1: skipped, nothing answers on port $2"
    [ "${DBJOBS_REQUIRE_ALL_DATABASES:-0}" = 1 ] && status=1
    return
  fi
  "$VENV/bin/python" bench/run.py --smoke --database "$3" || status=1
  "$VENV/bin/python" bench/enqueue_profile.py --jobs 50 --runs 1 --database "$3" || status=1
}
run sqlite "" "sqlite:///$PWD/.bench-smoke.sqlite3"
run postgres 5432 "${DBJOBS_BENCH_POSTGRES_URL:-postgres://root@127.0.0.1:5432/dbjobs_bench}"
run mysql 3306 "${DBJOBS_BENCH_MYSQL_URL:-mysql://root@127.0.0.1:3306/dbjobs_bench}"
exit $status
