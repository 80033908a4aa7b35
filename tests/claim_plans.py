"""What the database plans for a claim: read on the claim index in claim order, no sort."""

from django.db import connection


def assert_on_the_claim_index(cursor, sql: str, params: list) -> None:
    """Fail unless `sql` (a claim's first statement) reads dbjobs_job_claimable_idx without sorting.

    PostgreSQL is asked about the statement as the planner sees it with its default
    settings (claims turn enable_sort off; test_claim_without_sort covers that)."""
    vendor = connection.vendor
    if vendor == "postgresql":
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        assert "Index Scan using dbjobs_job_claimable_idx" in plan, plan
        assert "Seq Scan" not in plan and "Sort" not in plan, plan
    elif vendor == "mysql":
        cursor.execute(f"EXPLAIN {sql}", params)
        names = [column[0] for column in cursor.description]
        (row,) = [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]
        assert row["key"] == "dbjobs_job_claimable_idx", row
        assert "filesort" not in (row["Extra"] or ""), row
    else:
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        plan = "\n".join(str(row[-1]) for row in cursor.fetchall())
        index = "dbjobs_job_claimable_idx"
        assert f"USING INDEX {index}" in plan or f"USING COVERING INDEX {index}" in plan, plan
        assert "TEMP B-TREE" not in plan, plan
