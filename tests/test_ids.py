import uuid

from django_dbjobs.models.ids import new_id


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


def test_ids_made_in_a_batch_are_those_one_by_one_would_be():
    from django_dbjobs.models.ids import new_ids

    made = [new_id(), *new_ids(5000), new_id(), *new_ids(1), *new_ids(0), new_id()]
    assert len(made) == 5004 and made == sorted(made) and len(set(made)) == len(made)
    for value in map(uuid.UUID, made):
        assert value.version == 7 and value.variant == uuid.RFC_4122
    # Within a millisecond the 12 rand_a bits count on; rand_b stays random.
    assert len({m[19:] for m in made}) == len(made)
    millis = int(made[1].replace("-", "")[:12], 16)
    assert abs(millis - __import__("time").time() * 1000) < 60_000


def test_a_batch_counts_on_one_by_one_across_milliseconds():
    from django_dbjobs.models.ids import new_ids

    made = new_ids(10_000)  # more than the 4,096 counters of a millisecond: runs the clock ahead
    stamps = [(int(m[:8] + m[9:13], 16), int(m[15:18], 16)) for m in made]
    for (millis, counter), (next_millis, next_counter) in zip(stamps, stamps[1:], strict=False):
        assert (next_millis, next_counter) in ((millis, counter + 1), (millis + 1, 0)), (millis, counter)
    assert {m[14] for m in made} == {"7"} and {m[19] for m in made} == set("89ab")
    assert len({m[19:] for m in made}) == len(made)


def test_a_batch_overflowing_the_counter_moves_to_the_next_millisecond_as_single_ids_do(monkeypatch):
    """With the clock behind the last id's millisecond (stepped back, or run ahead by a large
    batch), ids count on from the last one: past 0xFFF into the next millisecond at 0."""
    from django_dbjobs.models import ids

    def stamps(made):
        return [(int(m[:8] + m[9:13], 16), int(m[15:18], 16)) for m in made]

    ahead = (__import__("time").time_ns() // 1_000_000) + 60_000  # a minute ahead of the clock
    made = {}
    for name, make in (
        ("batch", lambda: ids.new_ids(3)),
        ("single", lambda: [ids.new_id() for _ in range(3)]),
    ):
        monkeypatch.setattr(ids, "_last_millis", ahead)
        monkeypatch.setattr(ids, "_sequence", 0xFFE)
        made[name] = make()
    expected = [(ahead, 0xFFF), (ahead + 1, 0), (ahead + 1, 1)]
    assert stamps(made["batch"]) == stamps(made["single"]) == expected
    monkeypatch.setattr(ids, "_last_millis", ahead)
    monkeypatch.setattr(ids, "_sequence", 0xFFF)
    assert stamps(ids.new_ids(1)) == [(ahead + 1, 0)]
    assert stamps(ids.new_ids(1)) == [(ahead + 1, 1)]
