"""PostgreSQL's NOTIFY triggers, and the migration operations that create them: NotifyTriggers
(jobs and schedules) and QueueTriggers (queues paused or resumed), both in migration 0001."""

from django.db import migrations

#: The LISTEN channel (db/listen.py listens on it).
CHANNEL = "dbjobs"

# The SQL of the development versions' migrations (0003 and 0005 of the nine, 0006 of the
# seven), unchanged, so a database made by the initial migration has the same functions
# and triggers as one made by those. Migrations run what is written here: change a
# trigger in a new operation of a new migration, never by editing this text.

# A new job, or one READY again (a retry, a job given back): wake idle workers. Sent
# from inside the enqueuing transaction, so it is delivered on commit and never on
# rollback, and costs the enqueue no extra round trip.
JOBS = f"""
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

# A schedule created, deleted or with its definition saved: every scheduler reads the
# schedules again at once. Columns only schedulers write (next_due_at, last_*) are left
# out: firing a schedule wakes nobody.
SCHEDULES = """
CREATE OR REPLACE FUNCTION dbjobs_schedules_changed() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('dbjobs', 'schedules');
    RETURN NULL;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER dbjobs_schedule_changed
    AFTER INSERT OR DELETE OR UPDATE OF cron, timezone, enabled, removed_at ON django_dbjobs_schedule
    FOR EACH STATEMENT EXECUTE FUNCTION dbjobs_schedules_changed();
"""

# A queue paused or resumed (a row inserted, deleted or its paused_at set, TRUNCATE
# included): an idle worker trusts the paused queues it read for as long as its LISTEN
# session lasts and hears nothing of them (worker/claiming/paused_queues.py), so its wake-up claim
# need not read them again first. The function sends its trigger's argument as the
# payload: a trigger of a later migration needs no function of its own.
QUEUES = """
CREATE OR REPLACE FUNCTION dbjobs_notify_payload() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('dbjobs', TG_ARGV[0]);
    RETURN NULL;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER dbjobs_queue_changed
    AFTER INSERT OR DELETE OR UPDATE OF paused_at OR TRUNCATE ON django_dbjobs_queue
    FOR EACH STATEMENT EXECUTE FUNCTION dbjobs_notify_payload('queues');
"""

#: Whether that trigger is there and fires for ordinary sessions (a worker trusts what it
#: heard only then: a database not migrated yet, or the trigger disabled, tells nothing).
QUEUE_TRIGGER_FIRES = """
SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass('django_dbjobs_queue')
    AND tgname = 'dbjobs_queue_changed' AND tgenabled IN ('O', 'A'))
"""

DROP_QUEUES = """
DROP TRIGGER IF EXISTS dbjobs_queue_changed ON django_dbjobs_queue;
DROP FUNCTION IF EXISTS dbjobs_notify_payload();
"""

DROP = """
DROP TRIGGER IF EXISTS dbjobs_schedule_changed ON django_dbjobs_schedule;
DROP FUNCTION IF EXISTS dbjobs_schedules_changed();
DROP TRIGGER IF EXISTS dbjobs_job_ready_again ON django_dbjobs_job;
DROP TRIGGER IF EXISTS dbjobs_job_inserted ON django_dbjobs_job;
DROP FUNCTION IF EXISTS dbjobs_notify();
"""


class NotifyTriggers(migrations.operations.base.Operation):
    """PostgreSQL: create the triggers that NOTIFY workers of new jobs and changed schedules.

    Other databases: nothing (their workers see new jobs and schedules by polling cheaply).
    An operation rather than RunPython, so ``sqlmigrate`` shows the SQL.
    """

    reduces_to_sql = True
    reversible = True
    create, drop = JOBS + SCHEDULES, DROP
    model = "job"  # the router's word on this model decides where the triggers go
    description = "Create the NOTIFY triggers of the job and schedule tables (PostgreSQL)"

    def deconstruct(self):
        return self.__class__.__qualname__, [], {}

    def state_forwards(self, app_label, state):
        pass

    def describe(self):
        return self.description

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if self._applies(app_label, schema_editor, to_state):
            schema_editor.execute(self.create, params=None)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if self._applies(app_label, schema_editor, from_state):
            schema_editor.execute(self.drop, params=None)

    def _applies(self, app_label, schema_editor, state) -> bool:
        connection = schema_editor.connection
        model = state.apps.get_model(app_label, self.model)
        return connection.vendor == "postgresql" and self.allow_migrate_model(connection.alias, model)


class QueueTriggers(NotifyTriggers):
    """PostgreSQL: create the trigger that NOTIFYs workers of queues paused or resumed."""

    create, drop = QUEUES, DROP_QUEUES
    model = "queue"
    description = "Create the NOTIFY trigger of the queue table (PostgreSQL)"
