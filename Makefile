.PHONY: demo test lint docs

# Run the example project's demo jobs on SQLite (no server needed).
demo:
	bash scripts/demo.sh

# Run the test suite on SQLite, PostgreSQL and MariaDB (servers that are not running are skipped).
test:
	bash scripts/test.sh

lint:
	.venv/bin/ruff check django_dbjobs tests example_project
	.venv/bin/ruff format --check django_dbjobs tests example_project

docs:
	.venv/bin/python -m sphinx -W -b html docs docs/_build/html
