"""Index changes a migration makes while enqueues and claims go on: AddIndexOnline,
RemoveIndexOnline and DropIdPatternIndex."""

from django.db import migrations
from django.db.backends.ddl_references import Statement


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
    completion wrote an entry in it. Right after the table is created, in the same
    migration (the initial one), the index is never built. Other databases have no such
    index. No model state changes: Django does not track the index.
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
        return f"Drop (or never build) the LIKE index of {self.model_name}.{self.field} (PostgreSQL)"

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
        if target is None:
            return
        table, _column, name, online = target
        quote = schema_editor.quote_name
        # A table created by the same migration gets its indexes when the migration ends:
        # the index is then never built, rather than built and dropped.
        pending = [
            statement
            for statement in schema_editor.deferred_sql
            if isinstance(statement, Statement) and statement.references_index(table, quote(name))
        ]
        for statement in pending:
            schema_editor.deferred_sql.remove(statement)
        if not pending:
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


def is_index_only(migration: migrations.Migration) -> bool:
    """Whether `migration` only adds or drops indexes with the operations above.

    A worker of the new release may start before such a migration is applied (its
    queries are right with either set of indexes, only slower), so a long index build
    never keeps workers from starting (db.pending_migrations()).
    """
    if getattr(migration, "workers_need_it", False):  # the claim names an index it builds
        return False
    kinds = (AddIndexOnline, RemoveIndexOnline, DropIdPatternIndex)
    return bool(migration.operations) and all(isinstance(op, kinds) for op in migration.operations)
