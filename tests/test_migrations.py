import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_models_and_migrations_agree():
    # Exits with status 1 (SystemExit) when a model change has no migration.
    call_command("makemigrations", "django_dbjobs", "--check", "--dry-run", verbosity=0)


@pytest.mark.django_db
def test_claim_index_matches_the_claim_order():
    from django.db import connection

    from django_dbjobs.models import Job

    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, Job._meta.db_table)
    columns = constraints["dbjobs_job_claim_idx"]["columns"]
    if connection.features.supports_partial_indexes:
        assert columns == ["priority", "run_at", "id"]  # partial: WHERE status = 'READY'
    else:
        assert columns == ["status", "priority", "run_at", "id"]
