"""The nine migrations of the development releases, as they were: a test fixture.

django_dbjobs/migrations/0001_initial.py replaces them, and the six that came after them
(tests/seven_migrations). With ``MIGRATION_MODULES = {"django_dbjobs": "tests.old_migrations"}``,
test_migration_history.py remakes the test database's tables with them, as those
releases left a user's database, and test_online_index.py tries the index operations of
0007 and 0009 (its database, made by the initial migration, records all nine as
applied). Never edit them: they are what users' databases ran.
"""
