"""Write the module index of docs/code-layout.rst from the modules' docstrings.

Usage: python scripts/code_layout.py        (rewrites the index between its markers)
       python scripts/code_layout.py --check (exit 1 if the page is out of date)

tests/test_code_layout.py runs the check, so a module added, moved or removed without
this page following fails the suite.
"""

from __future__ import annotations

import ast
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "django_dbjobs"
PAGE = ROOT / "docs" / "code-layout.rst"
BEGIN = ".. module-index-begin (written by scripts/code_layout.py: do not edit by hand)"
END = ".. module-index-end"


def first_line(path: pathlib.Path) -> str:
    """The first paragraph of a module's docstring on one line ("" if it has none), safe in rst."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    text = " ".join(doc.split("\n\n")[0].split())
    # A word ending in "_" (DBJOBS_) is a link in reStructuredText; a lone * starts emphasis.
    return re.sub(r"(?<=\w)_(?=\W|$)", r"\\_", text).replace(" *", " \\*")


def modules() -> list[pathlib.Path]:
    return sorted(
        (p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts),
        key=lambda p: (p.parent.relative_to(PACKAGE).parts, p.name != "__init__.py", p.name),
    )


def index() -> str:
    """The module index: one section per folder, one entry per module, docstring's first paragraph."""
    lines = [BEGIN, ""]
    folder = None
    for path in modules():
        parent = path.parent.relative_to(PACKAGE).as_posix()
        if parent != folder:
            folder = parent
            title = "django_dbjobs/" if parent == "." else f"django_dbjobs/{parent}/"
            lines += [f"``{title}``", "~" * (len(title) + 4), ""]
        name = path.relative_to(PACKAGE).as_posix()
        lines += [f"``{name}``", f"   {first_line(path) or '(no docstring)'}", ""]
    lines.append(END)
    return "\n".join(lines)


def rewritten(page: str) -> str:
    before, _, rest = page.partition(BEGIN)
    _, _, after = rest.partition(END)
    return before + index() + after


def main() -> int:
    page = PAGE.read_text(encoding="utf-8")
    if BEGIN not in page or END not in page:
        print(f"{PAGE} has no module index markers", file=sys.stderr)
        return 1
    new = rewritten(page)
    if "--check" in sys.argv:
        if new != page:
            print("docs/code-layout.rst is out of date: run python scripts/code_layout.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
