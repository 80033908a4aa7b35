"""Every module of the package opens with a docstring saying what it holds."""

import ast
import pathlib

import django_dbjobs

PACKAGE = pathlib.Path(django_dbjobs.__file__).parent


def test_every_module_has_a_docstring():
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 100, "the package was not found where it was looked for"
    missing = [
        str(path.relative_to(PACKAGE.parent))
        for path in modules
        if not ast.get_docstring(ast.parse(path.read_text(), str(path)))
    ]
    assert missing == [], f"modules without a docstring: {missing}"
