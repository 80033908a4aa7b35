"""The modules a worker imports as it starts, read from the import statements of the project's code.

A worker registers the jobs of the modules it imports: Django's setup imports each
installed app and its ``models`` (and, with the admin installed, its ``admin``), and
registry.autodiscover() the ``jobs`` and ``tasks`` modules and DBJOBS_JOB_MODULES. Each of
those imports more. Whether a job's module is among them cannot be read off a web
process, which has imported its views too (and a view's ``import shop.jobs.emails`` makes
``emails`` an attribute of ``shop.jobs`` there as well): so the module-level import
statements of the project's own files are followed from those roots instead. An import
inside a function runs later, if ever, and is not followed; nor is an installed package,
Django or django_dbjobs, which define no job of the project.
"""

from __future__ import annotations

import ast
import importlib.util
import site
import sys
from collections.abc import Iterator

from django.apps import apps

from .. import registry

#: Modules whose imports are not followed: they define no job of the project's.
_NOT_FOLLOWED = ("django", "django_dbjobs")
_INSTALLED = tuple(
    {
        path
        for path in (sys.prefix, sys.base_prefix, *site.getsitepackages(), site.getusersitepackages())
        if path
    }
)


def roots() -> list[str]:
    """What a worker imports by name: each app, its AppConfig's module, models and admin; the job modules."""
    admin = apps.is_installed("django.contrib.admin")
    names = []
    for app in apps.get_app_configs():
        names += [app.name, type(app).__module__]
        if app.models_module is not None:
            names.append(app.models_module.__name__)
        if admin:
            names.append(f"{app.name}.admin")
    return list(dict.fromkeys([*names, *registry.job_modules()]))


def imported_at_start() -> set[str]:
    """Every module of the project that a worker imports as it starts, as its import statements say."""
    seen: set[str] = set()
    todo = roots()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(found for found in _imports_of(name) if found not in seen)
    return seen


def _imports_of(name: str) -> Iterator[str]:
    """The modules `name`'s module-level statements import, with their packages."""
    if name.split(".")[0] in _NOT_FOLLOWED:
        return
    try:
        spec = importlib.util.find_spec(name)  # imports its package, as the worker would
    except Exception:  # noqa: BLE001 - not a module (an attribute imported by name), or a broken one
        return
    origin = getattr(spec, "origin", None)
    if not origin or not origin.endswith(".py") or origin.startswith(_INSTALLED):
        return
    try:
        with open(origin, encoding="utf-8") as file:
            tree = ast.parse(file.read(), origin)
    except (OSError, SyntaxError, ValueError):
        return
    package = name if spec.submodule_search_locations is not None else name.rpartition(".")[0]
    for statement in _module_level(tree.body):
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                yield from _with_packages(alias.name)
        elif isinstance(statement, ast.ImportFrom):
            try:
                base = importlib.util.resolve_name("." * statement.level + (statement.module or ""), package)
            except (ImportError, ValueError):
                continue
            yield from _with_packages(base)
            yield from (f"{base}.{alias.name}" for alias in statement.names if alias.name != "*")


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements that run when the module is imported: not those inside functions."""
    for statement in body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        yield statement
        for block in ("body", "orelse", "finalbody"):
            yield from _module_level(getattr(statement, block, None) or [])
        for handler in getattr(statement, "handlers", None) or []:
            yield from _module_level(handler.body)


def _with_packages(name: str) -> Iterator[str]:
    """'a.b.c' and the packages importing it imports: 'a.b', 'a'."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        yield ".".join(parts[:end])
