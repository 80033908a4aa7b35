"""The release checklist's checks (docs/releasing.rst): one version, a changelog that matches it."""

import re
import runpy
import sys
from pathlib import Path

from packaging.version import Version

import django_dbjobs

ROOT = Path(__file__).resolve().parent.parent

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = None


def test_the_version_is_pep_440_and_normalised():
    assert str(Version(django_dbjobs.__version__)) == django_dbjobs.__version__


def test_pyproject_reads_the_version_from_the_package():
    text = (ROOT / "pyproject.toml").read_text()
    if tomllib is None:
        assert not re.search(r"^version\s*=", text, re.MULTILINE), "pyproject.toml has a version of its own"
        assert 'attr = "django_dbjobs.__version__"' in text
        return
    pyproject = tomllib.loads(text)
    assert "version" not in pyproject["project"], "pyproject.toml has a version of its own"
    assert "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "django_dbjobs.__version__"}


def test_the_docs_read_the_version_from_the_package():
    assert runpy.run_path(str(ROOT / "docs" / "conf.py"))["release"] == django_dbjobs.__version__


def test_no_other_file_spells_the_version():
    version = re.compile(rf"(?<![\w.]){re.escape(django_dbjobs.__version__)}(?![\w.])")
    found = []
    for path in [ROOT / "README.rst", ROOT / "pyproject.toml", *(ROOT / "docs").rglob("*.rst")]:
        # The changelog's headings and the checklist's example of a bump name versions, as they should.
        if path.name not in ("changelog.rst", "releasing.rst") and version.search(path.read_text()):
            found.append(str(path.relative_to(ROOT)))
    assert not found, f"{found} name version {django_dbjobs.__version__}: only __init__.py should"


def test_the_changelog_opens_with_this_version():
    version = Version(django_dbjobs.__version__)
    heading = re.search(
        r"^(\d\S*) \((.+)\)\n-+$", (ROOT / "docs" / "changelog.rst").read_text(), re.MULTILINE
    )
    assert heading, "docs/changelog.rst has no version heading"
    number, when = heading.groups()
    if version.is_devrelease or version.is_prerelease:
        assert (number, when) == (version.base_version, "unreleased")
    else:
        assert number == str(version)
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", when), f"the release's heading needs its date, not {when!r}"


def test_the_release_checklist_names_only_make_targets_that_exist():
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.MULTILINE))
    named = set(re.findall(r"\bmake ([\w-]+)", (ROOT / "docs" / "releasing.rst").read_text()))
    assert {"test", "lint", "typecheck", "docs", "package"} <= named
    assert named <= targets, f"docs/releasing.rst names make targets the Makefile lacks: {named - targets}"
