"""idempotency/differences.py: what a second snapshot has that the first has not (no database)."""

import pytest
from django.contrib.sessions.models import Session

from django_dbjobs.idempotency.differences import new_emails, new_jobs, row_changes
from django_dbjobs.idempotency.snapshots import Snapshot, Table
from tests.models import Entry, Ledger


def snapshot(ledgers: dict, entries: dict, jobs: dict | None = None, emails: tuple = ()) -> Snapshot:
    """Ledger rows pk -> (name, balance, imported); Entry rows pk -> (ledger_id, text, amount)."""
    return Snapshot(
        {
            "tests.Ledger": Table(Ledger, ("name", "balance", "imported"), (None, None, None), ledgers),
            "tests.Entry": Table(
                Entry, ("ledger_id", "text", "amount"), ("tests.Ledger", None, None), entries
            ),
        },
        jobs or {},
        emails,
    )


def described(changes) -> list[tuple]:
    return [(change.model, change.pk, change.kind, change.values) for change in changes]


ANN = ("ann", 5, False)


@pytest.mark.parametrize(
    ("second", "expected"),
    [
        pytest.param(snapshot({1: ANN}, {1: (1, "a", 1)}), [], id="the same rows"),
        pytest.param(
            snapshot({1: ("ann", 10, False)}, {1: (1, "a", 1)}),
            [("tests.Ledger", 1, "changed", {"balance": (5, 10)})],
            id="a column changed",
        ),
        pytest.param(
            snapshot({1: ANN}, {1: (1, "a", 1), 2: (1, "a", 1)}),
            [("tests.Entry", 2, "added", {"ledger_id": 1, "text": "a", "amount": 1})],
            id="a row added alike",
        ),
        pytest.param(
            snapshot({1: ANN}, {}),
            [("tests.Entry", 1, "removed", {"ledger_id": 1, "text": "a", "amount": 1})],
            id="a row removed",
        ),
        pytest.param(
            snapshot({2: ANN}, {7: (2, "a", 1)}),
            [],
            id="parent and child made again alike, new keys followed",
        ),
        pytest.param(
            snapshot({2: ANN}, {7: (2, "b", 1)}),
            [
                ("tests.Entry", 1, "removed", {"ledger_id": 1, "text": "a", "amount": 1}),
                ("tests.Entry", 7, "added", {"ledger_id": 2, "text": "b", "amount": 1}),
            ],
            id="a child made again otherwise",
        ),
        pytest.param(
            snapshot({1: ANN}, {7: (1, "a", 1), 8: (1, "a", 1)}),
            [("tests.Entry", 8, "added", {"ledger_id": 1, "text": "a", "amount": 1})],
            id="made again once and added once",
        ),
    ],
)
def test_row_changes(second, expected):
    assert described(row_changes(snapshot({1: ANN}, {1: (1, "a", 1)}), second)) == expected


def test_rows_under_keys_nobody_generates_are_never_paired():
    """A key chosen by the code (a session key, a code) means something: another key, another row."""
    first = Snapshot({"sessions.Session": Table(Session, ("session_data",), (None,), {"k1": ("x",)})}, {}, ())
    second = Snapshot(
        {"sessions.Session": Table(Session, ("session_data",), (None,), {"k2": ("x",)})}, {}, ()
    )
    assert not second.tables["sessions.Session"].generated_keys
    assert [(change.pk, change.kind) for change in row_changes(first, second)] == [
        ("k1", "removed"),
        ("k2", "added"),
    ]


def test_new_jobs_and_emails():
    first = snapshot({}, {}, jobs={"01a": "a()"}, emails=("'Hi' to ann@example.com",))
    second = snapshot(
        {}, {}, jobs={"01a": "a()", "01c": "c()", "01b": "b()"}, emails=first.emails + ("'Hi' to bob",)
    )
    assert new_jobs(first, second) == ("b()", "c()")
    assert new_emails(first, second) == ("'Hi' to bob",)


def test_rows_made_again_with_json_values_are_paired_by_content():
    """A JSON column comes back as dicts and lists: rows holding them are paired all the same."""
    from django_dbjobs.idempotency.snapshots import _plain

    first = snapshot({1: ("ann", _plain({"a": [1, 2]}), False)}, {})
    again = snapshot({2: ("ann", _plain({"a": [1, 2]}), False)}, {})
    other = snapshot({2: ("ann", _plain({"a": [1, 3]}), False)}, {})
    assert row_changes(first, again) == []
    changes = described(row_changes(first, other))
    assert [(model, pk, kind) for model, pk, kind, _values in changes] == [
        ("tests.Ledger", 1, "removed"),
        ("tests.Ledger", 2, "added"),
    ]
    assert repr(changes[1][3]["balance"]) == "{'a': [1, 3]}"
