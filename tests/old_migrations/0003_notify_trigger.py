"""PostgreSQL only: NOTIFY idle workers when jobs are inserted or become READY again.

A trigger sends the notification from inside the enqueuing transaction, so it is
delivered on commit and never on rollback, and costs the enqueue no extra round trip.
Other databases: nothing (their workers detect new jobs by polling cheaply).
"""

from django.db import migrations

CHANNEL = "dbjobs"

CREATE = f"""
CREATE OR REPLACE FUNCTION dbjobs_notify() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('{CHANNEL}', '');
    RETURN NULL;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER dbjobs_job_inserted AFTER INSERT ON django_dbjobs_job
    FOR EACH STATEMENT EXECUTE FUNCTION dbjobs_notify();
CREATE TRIGGER dbjobs_job_ready_again AFTER UPDATE OF status ON django_dbjobs_job
    FOR EACH ROW WHEN (NEW.status = 'READY' AND OLD.status <> 'READY')
    EXECUTE FUNCTION dbjobs_notify();
"""

DROP = """
DROP TRIGGER IF EXISTS dbjobs_job_ready_again ON django_dbjobs_job;
DROP TRIGGER IF EXISTS dbjobs_job_inserted ON django_dbjobs_job;
DROP FUNCTION IF EXISTS dbjobs_notify();
"""


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("django_dbjobs", "0002_unique_keys")]
    operations = [migrations.RunPython(create, drop, elidable=False)]
