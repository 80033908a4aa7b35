import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_models_and_migrations_agree():
    # Exits with status 1 (SystemExit) when a model change has no migration.
    call_command("makemigrations", "django_dbjobs", "--check", "--dry-run", verbosity=0)
