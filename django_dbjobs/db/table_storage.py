"""PostgreSQL: autovacuum settings of one table, set by a migration (SetAutovacuum).

A job table is small and hot: every job is inserted, updated twice (claimed, finished)
and deleted, and none of those updates can be HOT (each changes ``status``, which the
indexes name), so each leaves a dead row in the heap and in every index. Autovacuum's
defaults wait for 20 % of a table to be dead, which on a table holding a week of history
means millions of dead rows, and the claim reads past the dead entries of its index
meanwhile. The settings here make autovacuum visit the job table after 1 % of it has
changed (deleted, updated or inserted) and let it do ten times the default work per
pause, so it finishes in seconds.

``ALTER TABLE ... SET`` takes a lock that lets reads and writes go on (SHARE UPDATE
EXCLUSIVE), but waits for a vacuum running on the table. Elsewhere nothing is done:
InnoDB purges by itself, SQLite reuses free pages.
"""

from __future__ import annotations

from django.db import migrations


class SetAutovacuum(migrations.operations.base.Operation):
    """Set `parameters` (PostgreSQL storage parameters) on `model_name`'s table; RESET them backwards."""

    reversible = True
    reduces_to_sql = True

    def __init__(self, model_name: str, parameters: dict[str, str]):
        self.model_name = model_name
        self.parameters = parameters

    def deconstruct(self):
        return (
            self.__class__.__qualname__,
            [],
            {"model_name": self.model_name, "parameters": self.parameters},
        )

    def state_forwards(self, app_label, state):
        pass  # no model state: the settings live in the database alone

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        settings = ", ".join(f"{name} = {value}" for name, value in self.parameters.items())
        self._alter(app_label, schema_editor, to_state, f"SET ({settings})")

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        self._alter(app_label, schema_editor, from_state, f"RESET ({', '.join(self.parameters)})")

    def _alter(self, app_label, schema_editor, state, change: str) -> None:
        model = state.apps.get_model(app_label, self.model_name)
        connection = schema_editor.connection
        if connection.vendor != "postgresql" or not self.allow_migrate_model(connection.alias, model):
            return
        schema_editor.execute(f"ALTER TABLE {schema_editor.quote_name(model._meta.db_table)} {change}")

    def describe(self):
        return f"Set autovacuum settings of {self.model_name} (PostgreSQL)"

    @property
    def migration_name_fragment(self):
        return f"autovacuum_{self.model_name.lower()}"
