"""Index changes a migration makes while enqueues and claims go on: AddIndexOnline,
RemoveIndexOnline and DropIdPatternIndex."""

from django.db import migrations

#: Migrations that only add or drop indexes: a worker of the new release may start before
#: they are applied (its queries are right with either set, only slower), so a long
#: index build never keeps workers from starting.
INDEX_ONLY_MIGRATIONS = frozenset({"0007_admin_indexes", "0009_leaner_job_indexes"})


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


class RemoveIndexOnline(migrations.RemoveIndex):
    """Drop an index without waiting in line for the table's lock, and survive a re-run.

    PostgreSQL: ``DROP INDEX CONCURRENTLY IF EXISTS`` (the migration sets ``atomic =
    False``), which takes no lock that stops reads or writes; a plain ``DROP INDEX``
    would wait behind any long transaction on the table and hold up every enqueue
    queued behind it. Elsewhere, and backwards, as RemoveIndex does, once.
    """

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        model = from_state.apps.get_model(app_label, self.model_name)
        connection = schema_editor.connection
        if not self.allow_migrate_model(connection.alias, model):
            return
        index = from_state.models[app_label, self.model_name_lower].get_index_by_name(self.name)
        table = model._meta.db_table
        if not schema_editor.collect_sql and _index_state(connection, table, self.name) is None:
            return
        online = connection.vendor == "postgresql" and not connection.in_atomic_block
        schema_editor.remove_index(model, index, **({"concurrently": True} if online else {}))

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        index = to_state.models[app_label, self.model_name_lower].get_index_by_name(self.name)
        adding = AddIndexOnline(self.model_name, index)
        adding.database_forwards(app_label, schema_editor, from_state, to_state)


class DropIdPatternIndex(migrations.operations.base.Operation):
    """PostgreSQL: drop the ``varchar_pattern_ops`` index Django adds beside a CharField key.

    Django makes it for ``LIKE 'abc%'`` on the id; nothing here asks that (the admin
    finds a job by its exact id, through the primary key), yet every INSERT, claim and
    completion wrote an entry in it. Other databases have no such index. No
    model state changes: Django does not track the index.
    """

    reduces_to_sql = True
    reversible = True

    def __init__(self, model_name: str, field: str = "id"):
        self.model_name = model_name
        self.field = field

    def deconstruct(self):
        return self.__class__.__qualname__, [self.model_name, self.field], {}

    def state_forwards(self, app_label, state):
        pass

    def describe(self):
        return f"Drop the LIKE index of {self.model_name}.{self.field} (PostgreSQL)"

    def _target(self, app_label, schema_editor, state):
        model = state.apps.get_model(app_label, self.model_name)
        connection = schema_editor.connection
        if connection.vendor != "postgresql" or not self.allow_migrate_model(connection.alias, model):
            return None
        table = model._meta.db_table
        column = model._meta.get_field(self.field).column
        name = schema_editor._create_index_name(table, [column], suffix="_like")  # as Django names it
        return table, column, name, not connection.in_atomic_block

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        target = self._target(app_label, schema_editor, from_state)
        if target is not None:
            _table, _column, name, online = target
            quote = schema_editor.quote_name
            schema_editor.execute(f"DROP INDEX {'CONCURRENTLY ' if online else ''}IF EXISTS {quote(name)}")

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        target = self._target(app_label, schema_editor, to_state)
        if target is None:
            return
        table, column, name, online = target
        connection = schema_editor.connection
        if not schema_editor.collect_sql and _index_state(connection, table, name) == "valid":
            return
        quote = schema_editor.quote_name
        schema_editor.execute(f"DROP INDEX {'CONCURRENTLY ' if online else ''}IF EXISTS {quote(name)}")
        schema_editor.execute(
            f"CREATE INDEX {'CONCURRENTLY ' if online else ''}{quote(name)}"
            f" ON {quote(table)} ({quote(column)} varchar_pattern_ops)"
        )


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
