"""Check a built sdist and wheel: what the app needs is in, the tests are out.

Usage: python scripts/check_package.py dist/   (after `python -m build`)
"""

import re
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "django_dbjobs"


def needed_files() -> set[str]:
    """Every module, migration and template of the app, as paths inside the wheel."""
    found = set()
    for path in PACKAGE.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc",):
            found.add(str(path.relative_to(ROOT)))
    return found


def source_version() -> str:
    """``__version__`` as django_dbjobs/__init__.py writes it (the one place it is written)."""
    return re.search(r'^__version__ = "([^"]+)"$', (PACKAGE / "__init__.py").read_text(), re.MULTILINE)[1]


def main(dist: Path) -> int:
    problems = []
    wheels = sorted(dist.glob("django_dbjobs-*.whl"))
    sdists = sorted(dist.glob("django_dbjobs-*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        print(f"expected one wheel and one sdist in {dist}, found {wheels + sdists}")
        return 1
    names = set(zipfile.ZipFile(wheels[0]).namelist())
    missing = sorted(needed_files() - names)
    if missing:
        problems.append(f"the wheel lacks {len(missing)} files of the app, e.g. {missing[:5]}")
    for required in (
        "django_dbjobs/migrations/0001_initial.py",
        "django_dbjobs/templates/admin/django_dbjobs/overview.html",
        "django_dbjobs/templatetags/dbjobs_admin.py",
        "django_dbjobs/py.typed",
    ):
        if required not in names:
            problems.append(f"the wheel lacks {required}")
    strays = sorted(n for n in names if n.startswith(("tests/", "example_project/", "bench/", "docs/")))
    if strays:
        problems.append(f"the wheel ships files that are not the app: {strays[:5]}")
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheels[0]).read(metadata).decode()
    version = source_version()
    if not wheels[0].name.startswith(f"django_dbjobs-{version}-") or not sdists[0].name.startswith(
        f"django_dbjobs-{version}."
    ):
        problems.append(f"the files are not named for version {version}: {wheels[0].name}, {sdists[0].name}")
    for line in (
        "Name: django-dbjobs",
        f"Version: {version}",
        "Provides-Extra: postgres",
        "Provides-Extra: tasks",
    ):
        if line not in text:
            problems.append(f"the wheel's metadata lacks {line!r}")
    entry_points = next((n for n in names if n.endswith(".dist-info/entry_points.txt")), None)
    plugin = (
        entry_points
        and "django_dbjobs.pytest_plugin" in zipfile.ZipFile(wheels[0]).read(entry_points).decode()
    )
    if not plugin:
        problems.append("the wheel does not register the pytest plugin (entry point pytest11)")
    with tarfile.open(sdists[0]) as sdist:
        members = [m.split("/", 1)[1] for m in sdist.getnames() if "/" in m]
    if "django_dbjobs/migrations/0001_initial.py" not in members:
        problems.append("the sdist lacks the migrations")
    if "docs/index.rst" not in members:
        problems.append("the sdist lacks the documentation")
    strays = sorted(m for m in members if m.startswith(("tests/", "example_project/", "bench/", "scripts/")))
    if strays:
        problems.append(f"the sdist ships files that are not the package: {strays[:5]}")
    for problem in problems:
        print("PROBLEM:", problem)
    if not problems:
        print(f"OK: {wheels[0].name} ({len(names)} files) and {sdists[0].name}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "dist")))
