"""startup_imports: the modules a worker imports as it starts, followed through import statements."""

import textwrap

import pytest

from django_dbjobs.registry import startup_imports

FILES = {
    "shopx/__init__.py": "",
    "shopx/jobs/__init__.py": """
        from . import reports
        from shopx.common import utilities
        try:
            import shopx.optional
        except ImportError:
            pass

        def later():
            from shopx import helpers  # runs when called, not at import
    """,
    "shopx/jobs/reports.py": "from ..receipts import send_receipt\n",
    "shopx/jobs/emails.py": "",  # a job module its package does not import
    "shopx/receipts.py": "send_receipt = None\n",
    "shopx/common.py": "utilities = 1\n",
    "shopx/optional.py": "",
    "shopx/helpers.py": "",
    "shopx/views.py": "import shopx.jobs.emails\nimport shopx.helpers\n",  # the web process's imports
}


@pytest.fixture
def project(tmp_path, monkeypatch):
    for path, text in FILES.items():
        file = tmp_path / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(startup_imports, "roots", lambda: ["shopx", "shopx.jobs"])


def test_modules_imported_at_module_level_are_followed_from_the_roots(project):
    found = startup_imports.imported_at_start()
    assert {"shopx.jobs.reports", "shopx.receipts", "shopx.common", "shopx.optional"} <= found


def test_a_module_only_a_view_or_a_function_imports_is_not(project):
    import shopx.views  # noqa: F401 - as in the web process: emails is now an attribute of shopx.jobs

    found = startup_imports.imported_at_start()
    assert "shopx.jobs.emails" not in found, "a package does not import its submodules by itself"
    assert "shopx.helpers" not in found and "shopx.views" not in found


def test_installed_packages_django_and_django_dbjobs_are_not_followed():
    assert list(startup_imports._imports_of("django.db.models")) == []
    assert list(startup_imports._imports_of("django_dbjobs.worker.lifecycle.loop")) == []
    assert list(startup_imports._imports_of("json")) == []  # the standard library
