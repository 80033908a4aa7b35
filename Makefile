.PHONY: demo test lint typecheck docs bench-smoke bench-peers screenshots package

# Run the example project's demo jobs on SQLite (no server needed).
demo:
	bash scripts/demo.sh

# Run the test suite on SQLite, PostgreSQL and MariaDB (servers that are not running are skipped).
test:
	bash scripts/test.sh

# lint and docs install what they need into .venv first, as make test does.
lint:
	bash -c 'source scripts/venv.sh && ensure_venv lint'
	.venv/bin/ruff check django_dbjobs tests example_project bench scripts
	.venv/bin/ruff format --check django_dbjobs tests example_project bench scripts

# mypy over the package (pyproject.toml [tool.mypy]): the public API fully annotated.
typecheck:
	bash -c 'source scripts/venv.sh && ensure_venv typecheck'
	.venv/bin/python -m mypy

docs:
	bash -c 'source scripts/venv.sh && ensure_venv docs'
	.venv/bin/python -m sphinx -W -b html docs docs/_build/html

# The admin screenshots of the docs, taken by the browser test (needs chromium): docs/_static/admin-*.png.
screenshots:
	bash -c 'source scripts/venv.sh && ensure_venv "test,postgres"'
	mkdir -p docs/_static
	DBJOBS_SCREENSHOTS=docs/_static DBJOBS_REQUIRE_BROWSER=1 .venv/bin/python -m pytest -q -p no:cacheprovider \
		tests/test_admin_browser.py tests/test_admin_progress_browser.py

# A tiny run of the benchmark on each database (servers that are not running are skipped).
bench-smoke:
	bash scripts/bench_smoke.sh

# django-dbjobs next to pgqueuer, procrastinate and django-tasks-db on PostgreSQL, each peer
# installed in its own virtualenv under .bench-venvs/ (never a dependency of the package).
bench-peers:
	bash scripts/bench_peers.sh --runs 5

# Build the sdist and wheel, check them, and run a job and the example project's demo from the
# wheel installed in a fresh virtualenv (SQLite).
package:
	bash scripts/package.sh
