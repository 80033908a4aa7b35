"""The app's migration chains of the development versions, and the schema a database then has.

The ``chains`` fixture (conftest.py) unapplies the initial migration from the test
database; the test then migrates by any chain: the nine of tests/old_migrations (NINE),
the seven of tests/seven_migrations (SEVEN) or the app's own (None). Afterwards the chain
it used last unapplies them, and the initial migration makes the tables again.
"""

import re

from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.recorder import MigrationRecorder
from django.test.utils import override_settings

APP = "django_dbjobs"
NINE = "tests.old_migrations"
SEVEN = "tests.seven_migrations"


def latest() -> str:
    """The app's last migration."""
    (leaf,) = [name for app, name in MigrationExecutor(connection).loader.graph.leaf_nodes() if app == APP]
    return leaf


def migrate_app(target: str | None, chain: str | None = None) -> None:
    """Migrate django_dbjobs to `target` (None: unapply it all) by `chain` (None: the app's own)."""
    with override_settings(MIGRATION_MODULES={APP: chain} if chain else {}):
        MigrationExecutor(connection).migrate([(APP, target)])


def recorded() -> set[str]:
    """The app's migrations the database records as applied."""
    return {name for app, name in MigrationRecorder(connection).applied_migrations() if app == APP}


def fresh_tables():
    """Yield migrate_app(), to migrate tables made afresh (the ``chains`` fixture of conftest.py)."""
    connection.close()  # a fresh session: nothing prepared against the tables dropped here
    migrate_app(None)
    used = [None]

    def migrate(target: str | None, chain: str | None = None) -> None:
        used.append(chain)
        migrate_app(target, chain)

    try:
        yield migrate
    finally:
        migrate_app(None, used[-1])
        migrate_app(latest())
        connection.close()


def assert_same_schema(found: dict, expected: dict) -> None:
    assert found.keys() == expected.keys()
    for part in found:  # one part at a time, for a readable difference
        assert found[part] == expected[part], part


def schema() -> dict:
    """The app's tables as the database describes them: columns in order, indexes and
    constraints (with their conditions where the database keeps them), and triggers."""
    with connection.cursor() as cursor:
        introspection = connection.introspection
        tables = sorted(name for name in introspection.table_names(cursor) if name.startswith(f"{APP}_"))
        found = {"tables": tables}
        for table in tables:
            found[table] = {
                "columns": [tuple(column) for column in introspection.get_table_description(cursor, table)],
                "constraints": introspection.get_constraints(cursor, table),
            }
        found.update(DEFINITIONS[connection.vendor](cursor, tables))
    return found


def sqlite_definitions(cursor, tables):
    placeholders = ", ".join(["%s"] * len(tables))
    cursor.execute(
        f"SELECT type, name, sql FROM sqlite_master WHERE tbl_name IN ({placeholders}) ORDER BY name", tables
    )
    return {"definitions": cursor.fetchall()}


def mysql_definitions(cursor, tables):
    definitions = []
    for table in tables:
        cursor.execute(f"SHOW CREATE TABLE {connection.ops.quote_name(table)}")
        definitions.append(re.sub(r" AUTO_INCREMENT=\d+", "", cursor.fetchone()[1]))  # a counter, not schema
    return {"definitions": definitions}


def postgresql_definitions(cursor, tables):
    cursor.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = ANY(%s) ORDER BY indexname", [tables]
    )
    indexes = cursor.fetchall()
    cursor.execute(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE conrelid::regclass::text = ANY(%s) ORDER BY conname",
        [tables],
    )
    constraints = cursor.fetchall()
    cursor.execute(
        "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger"
        " WHERE NOT tgisinternal AND tgrelid::regclass::text = ANY(%s) ORDER BY tgname",
        [tables],
    )
    triggers = cursor.fetchall()
    cursor.execute(
        "SELECT proname, pg_get_functiondef(oid) FROM pg_proc WHERE proname LIKE %s ORDER BY 1", ["dbjobs%"]
    )
    return {
        "indexes": indexes,
        "constraints": constraints,
        "triggers": triggers,
        "functions": cursor.fetchall(),
    }


DEFINITIONS = {"sqlite": sqlite_definitions, "mysql": mysql_definitions, "postgresql": postgresql_definitions}
