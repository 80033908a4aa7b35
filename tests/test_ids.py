import uuid

from django_dbjobs.ids import new_id


def test_ids_are_uuid7_strings():
    value = uuid.UUID(new_id())
    assert value.version == 7 and value.variant == uuid.RFC_4122


def test_ids_increase_strictly_even_within_one_millisecond():
    ids = [new_id() for _ in range(20_000)]  # many share a millisecond
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
