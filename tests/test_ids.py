import uuid

from django_dbjobs.ids import new_id


def test_ids_are_uuid7_strings():
    value = uuid.UUID(new_id())
    assert value.version == 7 and value.variant == uuid.RFC_4122


def test_ids_increase_strictly_even_within_one_millisecond():
    ids = [new_id() for _ in range(20_000)]  # many share a millisecond
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


def test_a_forked_child_never_repeats_its_parents_random_bits():
    import os

    new_id()  # the parent has random bytes in hand
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report a batch of ids and leave at once
        os.write(write, " ".join(new_id() for _ in range(50)).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(read, 100_000).decode().split()
    parent = [new_id() for _ in range(50)]
    assert len(child) == 50
    assert not {c[19:] for c in child} & {p[19:] for p in parent}, "random parts repeated across a fork"
