"""The package's layers: a module never imports (even lazily) from a layer above its own.

docs/code-layout.rst draws them. Each entry of LAYERS is a layer, lowest first; a
module belongs to the entry naming the longest prefix of its dotted path (below
``django_dbjobs``). Two parts of one layer import neither each other.
"""

import ast
import pathlib

import django_dbjobs

PACKAGE = pathlib.Path(django_dbjobs.__file__).parent

LAYERS = [
    ["observability.log_fields"],  # pure: the extra of a log line about a job (signals.py logs some)
    ["conf", "exceptions", "signals"],
    ["cron", "registry", "observability.fingerprints"],  # pure: cron arithmetic; the registry
    # of job functions; a failure's fingerprint, which every write of a dead letter stores
    ["db"],  # everything that differs by database
    ["models"],
    [
        "observability"
    ],  # run hooks, tracing, failure groups; some parts sit lower or higher (entries of their own)
    ["context"],
    ["long_jobs"],  # resumable(): walks items in a running job (current_job()), from its checkpoint
    ["flow"],  # concurrency keys, rate limits, cancel requests
    ["enqueuing"],
    ["workflows"],  # batches and dependencies (their bookkeeping: models/settling.py)
    ["schedules"],
    ["operations"],
    ["observability.gauges"],  # the database gauges: read through operations/status.py
    ["worker"],
    # The gauges' view, mounted in a project's urls.py; the worker's metrics endpoint
    # (run_jobs --metrics-port), whose server threads start with the worker's signals blocked.
    ["backend", "observability.gauges_view", "observability.metrics_endpoint"],
    ["idempotency"],  # the checker testing.check_idempotency() runs jobs through
    ["testing", "checks"],
    ["pytest_plugin"],
    ["admin"],
    ["templatetags"],
    ["management"],
    ["apps", "migrations", "ids", ""],  # ids: kept for migration files; "": the package's __init__
]


def part_of(module: str) -> str:
    """The LAYERS entry `module` (dotted, below django_dbjobs; "" for the package) belongs to."""
    names = [name for layer in LAYERS for name in layer]
    matches = [name for name in names if module == name or module.startswith(name + ".") or name == ""]
    return max(matches, key=len)


def layer_of(module: str) -> int:
    part = part_of(module)
    return next(number for number, layer in enumerate(LAYERS) if part in layer)


def module_name(path: pathlib.Path) -> tuple[str, bool]:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(parts), is_package


def imports(path: pathlib.Path) -> set[str]:
    """The django_dbjobs modules (dotted, below it) `path` imports, at module level or in functions."""
    module, is_package = module_name(path)
    package = module.split(".") if is_package else module.split(".")[:-1]
    if module == "":
        package = []
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module and (node.module + ".").startswith("django_dbjobs."):
                source = node.module.removeprefix("django_dbjobs").lstrip(".")
            else:
                continue
            for alias in node.names:
                candidate = f"{source}.{alias.name}".lstrip(".")
                is_module = (PACKAGE / candidate.replace(".", "/")).with_suffix(".py").exists() or (
                    PACKAGE / candidate.replace(".", "/")
                ).is_dir()
                found.add(candidate if is_module else source)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if (alias.name + ".").startswith("django_dbjobs."):
                    found.add(alias.name.removeprefix("django_dbjobs").lstrip("."))
    return found


def upward_imports() -> list[str]:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module, _ = module_name(path)
        here, mine = layer_of(module), part_of(module)
        for imported in sorted(imports(path)):
            there, theirs = layer_of(imported), part_of(imported)
            if there > here or (there == here and theirs != mine):
                problems.append(
                    f"{module or 'django_dbjobs'} imports {imported} ({theirs!r} is not below {mine!r})"
                )
    return problems


def test_no_module_imports_from_a_layer_above_its_own():
    assert upward_imports() == []


def test_every_module_has_a_layer_of_its_own_name():
    """A new module at the root must be placed in LAYERS, not fall into the package's own."""
    for path in PACKAGE.rglob("*.py"):
        module, _ = module_name(path)
        assert module == "" or part_of(module) != "", f"{module} is not in LAYERS"


def test_the_worker_parts_do_not_import_the_loop():
    paths = sorted((PACKAGE / "worker").rglob("*.py"))
    assert len(paths) > 20, "the worker's modules moved: look for them where they are"
    for path in paths:
        if path.relative_to(PACKAGE).as_posix() not in ("worker/__init__.py", "worker/lifecycle/loop.py"):
            assert "worker.lifecycle.loop" not in imports(path), path.name


def test_the_check_sees_lazy_and_relative_imports(tmp_path, monkeypatch):
    """The test can fail: an import of the worker from a model, inside a function, is reported."""
    models = tmp_path / "models"
    models.mkdir()
    (models / "__init__.py").write_text("")
    (models / "job.py").write_text("def f():\n    from ..worker import loop\n    from . import queue\n")
    (models / "state.py").write_text("import django_dbjobs.admin\nfrom django_dbjobs import enqueuing\n")
    (models / "queue.py").write_text("")
    (tmp_path / "worker").mkdir()
    (tmp_path / "worker" / "loop.py").write_text("from ..models import job\n")
    (tmp_path / "worker" / "__init__.py").write_text("")
    (tmp_path / "admin").mkdir()
    (tmp_path / "enqueuing").mkdir()
    monkeypatch.setitem(globals(), "PACKAGE", tmp_path)
    assert upward_imports() == [
        "models.job imports worker.loop ('worker' is not below 'models')",
        "models.state imports admin ('admin' is not below 'models')",
        "models.state imports enqueuing ('enqueuing' is not below 'models')",
    ]
