"""AddIndexOnline: a migration's AddIndex that lets enqueues and claims go on meanwhile."""

from django.db import migrations

#: Migrations that only add indexes: a worker of the new release may start before they
#: are applied (its queries are right without them, only slower), so a long index build
#: never keeps workers from starting.
INDEX_ONLY_MIGRATIONS = frozenset({"0007_admin_indexes"})


class AddIndexOnline(migrations.AddIndex):
    """Add an index without blocking writes to a large job table, and survive a re-run.

    PostgreSQL: ``CREATE INDEX CONCURRENTLY`` (the migration sets ``atomic = False``;
    inside a transaction it falls back to a plain ``CREATE INDEX``). A build that was
    interrupted leaves an invalid index behind: it is dropped and built again. An index
    that already exists (a migration interrupted after it) is kept. MySQL/MariaDB:
    InnoDB builds secondary indexes online already. SQLite: a plain ``CREATE INDEX``.
    """

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        model = to_state.apps.get_model(app_label, self.model_name)
        connection = schema_editor.connection
        if not self.allow_migrate_model(connection.alias, model):
            return
        online = connection.vendor == "postgresql" and not connection.in_atomic_block
        # sqlmigrate collects the SQL without running it: show the build itself.
        state = (
            None
            if schema_editor.collect_sql
            else _index_state(connection, model._meta.db_table, self.index.name)
        )
        if state == "valid":
            return
        if state == "invalid":
            schema_editor.remove_index(model, self.index, **({"concurrently": True} if online else {}))
        schema_editor.add_index(model, self.index, **({"concurrently": True} if online else {}))

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        model = from_state.apps.get_model(app_label, self.model_name)
        connection = schema_editor.connection
        if not self.allow_migrate_model(connection.alias, model):
            return
        if (
            not schema_editor.collect_sql
            and _index_state(connection, model._meta.db_table, self.index.name) is None
        ):
            return
        online = connection.vendor == "postgresql" and not connection.in_atomic_block
        schema_editor.remove_index(model, self.index, **({"concurrently": True} if online else {}))


def _index_state(connection, table: str, name: str) -> str | None:
    """ "valid", "invalid" (an interrupted concurrent build, PostgreSQL) or None if absent."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
                " WHERE c.relname = %s AND i.indrelid = %s::regclass",
                [name, connection.ops.quote_name(table)],
            )
            row = cursor.fetchone()
            return None if row is None else ("valid" if row[0] else "invalid")
        constraints = connection.introspection.get_constraints(cursor, table)
    return "valid" if name in constraints else None
