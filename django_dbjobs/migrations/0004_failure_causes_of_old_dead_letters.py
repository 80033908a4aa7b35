"""The causes of the dead letters stored before causes were, a batch per transaction.

Safe to stop and run again: each batch commits on its own, and only dead letters without
a cause are read, in the order of the index of causes (0003), so the work stays linear
however many there are. Dead letters a worker of an older version stores meanwhile (a
rolling deploy) are given theirs by the workers afterwards.
"""

from django.db import migrations, transaction
from django_dbjobs.observability.fingerprints import fingerprint

#: Dead letters fingerprinted per transaction (each holds every attempt's traceback).
BATCH = 200


def fingerprint_dead_letters(apps, schema_editor):
    """Store the cause of every dead letter without one, from its last error record."""
    using = schema_editor.connection.alias
    jobs = apps.get_model("django_dbjobs", "Job")._base_manager.using(using)
    # The fingerprint leads the order although it is NULL throughout: PostgreSQL takes IS NULL
    # as no equality, and only then reads the index of causes in order instead of sorting.
    todo = jobs.filter(status="FAILED", error_fingerprint__isnull=True).order_by(
        "error_fingerprint", "finished_at", "pk"
    )
    while True:
        # The rows given a cause leave `todo`: each batch reads the next ones, never a row twice.
        rows = list(todo.values_list("pk", "errors", "last_error")[:BATCH])
        if not rows:
            return
        causes: dict[str, list[str]] = {}
        for pk, errors, last_error in rows:
            causes.setdefault(_cause(errors, last_error), []).append(pk)
        with transaction.atomic(using=using):
            for cause, pks in sorted(causes.items()):
                todo.filter(pk__in=pks).update(error_fingerprint=cause)  # still an uncaused dead letter


def _cause(errors, last_error) -> str:
    last = errors[-1] if errors and isinstance(errors, list) and isinstance(errors[-1], dict) else None
    try:
        return fingerprint(last or {"summary": str(last_error or "")})
    except Exception:  # noqa: BLE001 - a record of an older shape: its summary alone, never a stuck migration
        return fingerprint({"summary": str(last_error or "")})


class Migration(migrations.Migration):
    atomic = False
    #: Workers of this version may start before it has run: it changes no table, and they
    #: give the dead letters still without a cause theirs as they go.
    workers_need_it = False

    dependencies = [
        ("django_dbjobs", "0003_cause_and_live_job_indexes"),
    ]

    operations = [
        migrations.RunPython(fingerprint_dead_letters, migrations.RunPython.noop, elidable=True),
    ]
