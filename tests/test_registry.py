import pytest

from django_dbjobs import job, registry
from django_dbjobs.exceptions import InvalidJob, UnknownJob
from django_dbjobs.registry import discovery
from tests import job_elsewhere, jobs


def test_job_registers_under_its_dotted_path_and_stays_callable():
    assert registry.get("tests.jobs.add") is jobs.add
    assert jobs.add(2, 3) == 5
    assert jobs.add.__name__ == "add"


def test_job_options_become_defaults():
    assert jobs.send_email.options == registry.JobOptions(queue="emails", priority=5, max_attempts=7)


def test_nested_functions_cannot_be_registered_without_a_name():
    def inner():
        pass

    with pytest.raises(InvalidJob, match="module-level"):
        job(inner)


def test_explicit_name_registers_a_nested_function():
    def inner():
        return "ok"

    registered = job(name="tests.custom_name")(inner)
    assert registry.get("tests.custom_name") is registered


def test_unknown_names_and_unregistered_functions_raise():
    with pytest.raises(UnknownJob, match="os.system"):
        registry.get("os.system")
    with pytest.raises(UnknownJob, match="not_registered"):
        registry.resolve(jobs.not_registered)
    with pytest.raises(UnknownJob):
        registry.resolve(42)


def test_resolve_accepts_the_plain_function_of_a_registered_job():
    assert registry.resolve(jobs.add.func) is jobs.add


@pytest.mark.parametrize(
    "module, filename",
    [
        ("django.core.management.commands.shell", "<string>"),  # manage.py shell -c, or piped input
        (None, "<console>"),  # manage.py shell's plain console
        ("__main__", "<ipython-input-3-1f2e>"),  # IPython
    ],
)
def test_a_job_typed_in_manage_py_shell_is_told_to_move_to_a_jobs_module(module, filename):
    namespace = {"__name__": module}
    exec(compile("def cleanup():\n    pass\n", filename, "exec"), namespace)
    registered = registry.RegisteredJob(namespace["cleanup"], f"{module}.cleanup", registry.JobOptions())
    message = discovery.unimported_message(registered)
    assert "was defined in a shell" in message and "from myapp.jobs import cleanup." in message
    assert "DBJOBS_JOB_MODULES" not in message


def test_a_job_in_a_module_file_is_still_told_both_fixes():
    message = discovery.unimported_message(job_elsewhere.stray)
    assert "or add 'tests.job_elsewhere' to DBJOBS_JOB_MODULES" in message
