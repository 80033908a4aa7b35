"""docs/code-layout.rst names every module of the package, as the package is today."""

import pathlib
import subprocess
import sys

import django_dbjobs

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = pathlib.Path(django_dbjobs.__file__).parent
PAGE = (ROOT / "docs" / "code-layout.rst").read_text(encoding="utf-8")


def test_the_page_names_every_module():
    missing = [
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if f"``{path.relative_to(PACKAGE).as_posix()}``" not in PAGE
    ]
    assert missing == [], f"docs/code-layout.rst does not name {missing}: run python scripts/code_layout.py"


def test_the_page_names_no_module_that_is_gone():
    index = PAGE.partition(".. module-index-begin")[2].partition(".. module-index-end")[0]
    named = [
        line.strip().strip("`")
        for line in index.splitlines()
        if line.startswith("``") and line.endswith(".py``")
    ]
    assert len(named) > 100
    assert [name for name in named if not (PACKAGE / name).exists()] == []


def test_the_index_is_up_to_date():
    """Each entry is the module's docstring as it is now (python scripts/code_layout.py writes them)."""
    check = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "code_layout.py"), "--check"], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr
