"""The example project's own tests (`manage.py test shop`), run in a subprocess with its settings."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

EXAMPLE = Path(__file__).resolve().parent.parent / "example_project"


@pytest.mark.skipif(
    connection.vendor != "sqlite",
    reason="the example project's tests run on their own SQLite file; they run in the SQLite session",
)
def test_the_example_projects_tests_pass(tmp_path):
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "DBJOBS_TEST_")) and key != "PYTHONPATH"
    }
    environment.update(
        DJANGO_SETTINGS_MODULE="example_project.settings",  # pytest-django set tests.settings
        DATABASE_URL=f"sqlite:///{tmp_path / 'example.sqlite3'}",
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "test", "shop", "--noinput"],
        cwd=EXAMPLE,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"manage.py test shop failed:\n{result.stdout}\n{result.stderr}"
    assert "Ran 0 tests" not in result.stderr, result.stderr
