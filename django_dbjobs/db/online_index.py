"""AddIndexOnline: a migration's AddIndex that lets enqueues and claims go on meanwhile."""

from django.db import migrations


class AddIndexOnline(migrations.AddIndex):
    """Add an index without blocking writes to a large job table.

    PostgreSQL: ``CREATE INDEX CONCURRENTLY`` (the migration must set ``atomic = False``).
    MySQL/MariaDB: InnoDB builds secondary indexes online already. SQLite: a plain
    ``CREATE INDEX``; its writers wait for it, as for any write.
    """

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        model = to_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.add_index(model, self.index, concurrently=True)
        else:
            schema_editor.add_index(model, self.index)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        model = from_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.remove_index(model, self.index, concurrently=True)
        else:
            schema_editor.remove_index(model, self.index)
