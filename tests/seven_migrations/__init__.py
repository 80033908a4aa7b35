"""The seven migrations of the later development versions, as they were: a test fixture.

0001_initial (which replaces the nine of tests/old_migrations) then 0002_flow_control to
0007_dependency_uncounted_index. django_dbjobs/migrations/0001_initial.py replaces them
all. With ``MIGRATION_MODULES = {"django_dbjobs": "tests.seven_migrations"}``,
test_migration_history.py remakes the test database's tables with them, as those
versions left a user's database. Never edit them: they are what users' databases ran.
"""
