"""observability/fingerprints.py: failures of one cause share a fingerprint, others do not (no database)."""

import pytest

from django_dbjobs.observability.fingerprints import LENGTH, fingerprint, masked, user_frame


def frame(path, function, line=10):
    return f'  File "{path}", line {line}, in {function}\n    code()\n'


def trace(*frames, last="ValueError: boom"):
    return "Traceback (most recent call last):\n" + "".join(frames) + last + "\n"


WORKER = frame("/srv/venv/lib/python3.12/site-packages/django_dbjobs/worker/running/execution.py", "run")
CHECKOUT = frame("/srv/app/shop/payments.py", "charge")
CHECKOUT_MOVED = frame("/srv/release-2/shop/payments.py", "charge", line=99)
REFUND = frame("/srv/app/shop/payments.py", "refund")
STDLIB = frame("/usr/lib/python3.12/json/decoder.py", "decode")
LIBRARY = frame("/srv/venv/lib/python3.12/site-packages/requests/api.py", "get")
OUR_CHECKOUT = frame("/srv/venv/lib/python3.12/site-packages/django_dbjobs/testing.py", "run")


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("user 42 not found", "user <n> not found"),
        ("took 1.5 s", "took <n> s"),
        ("order ord_8f3K2 missing", "order <id> missing"),
        ("job 0192f0c4-7a1b-7c3d-9e8f-0123456789ab failed", "job <uuid> failed"),
        ("job 0192f0c47a1b7c3d9e8f0123456789ab failed", "job <uuid> failed"),
        ("object at 0x7f3a2b1c", "object at <hex>"),
        ("commit deadbeef12 not found", "commit <hex> not found"),
        # Inside quotes, what differs is masked, not the quoted value whole: it names things.
        ("KeyError: 'user_17'", "KeyError: '<id>'"),
        ("KeyError: 'email'", "KeyError: 'email'"),
        ('no such table "shop_order"', 'no such table "shop_order"'),
        ('unique constraint "app_user_email_key"', 'unique constraint "app_user_email_key"'),
        ("Duplicate entry 'ann@example.org' for key 'email'", "Duplicate entry '<email>' for key 'email'"),
        ("not found: 'order 42 of 0x1f'", "not found: 'order <n> of <hex>'"),
        # An apostrophe quotes nothing.
        ("It's broken, isn't it? 3 times", "It's broken, isn't it? <n> times"),
        # An HTTP status after "status" or "HTTP" is kept; any other number is not.
        ("status=503 after 3 tries", "status=503 after <n> tries"),
        ("Status code: 401 for user 12", "Status code: 401 for user <n>"),
        ("HTTP/1.1 404 Not Found", "HTTP/1.1 404 Not Found"),
        ("status 5031, took 404 ms", "status <n>, took <n> ms"),
        ("bounce from ann.lee+x@mail.example.org today", "bounce from <email> today"),
        ("worker web-1:4711:ab12 stopped heartbeating", "worker <id>:<n>:<id> stopped heartbeating"),
        ("Connection refused", "Connection refused"),
        ("a  b\n\tc", "a b c"),
    ],
)
def test_masked_hides_what_differs_between_failures(message, expected):
    assert masked(message) == expected


@pytest.mark.parametrize(
    ("traceback", "expected"),
    [
        (trace(WORKER, CHECKOUT), "shop/payments.py:charge"),
        (trace(WORKER, CHECKOUT, STDLIB), "shop/payments.py:charge"),
        (trace(WORKER, CHECKOUT, LIBRARY), "shop/payments.py:charge"),
        (trace(WORKER, REFUND, CHECKOUT), "shop/payments.py:charge"),
        (trace(WORKER), ""),
        (
            trace(frame("django_dbjobs/execution.py", "run"), frame("demo/jobs.py", "build")),
            "demo/jobs.py:build",
        ),
        (
            trace(frame("demo/jobs.py", "build"), frame("django_dbjobs/execution.py", "run")),
            "demo/jobs.py:build",
        ),
        (trace(WORKER, STDLIB, OUR_CHECKOUT), ""),
        ("", ""),
        (frame("<frozen importlib._bootstrap>", "_call_with_frames_removed"), ""),
        (frame("C:\\app\\shop\\payments.py", "charge"), "shop/payments.py:charge"),
        (frame("C:\\Python312\\Lib\\json\\decoder.py", "decode"), ""),
        # A chain: the frame is the last exception's, not its cause's.
        (
            trace(REFUND, last="KeyError: 1")
            + "\nThe above exception was the direct cause of the following exception:\n\n"
            + trace(CHECKOUT),
            "shop/payments.py:charge",
        ),
        (
            trace(REFUND, last="KeyError: 1")
            + "\nDuring handling of the above exception, another exception occurred:\n\n"
            + trace(WORKER),
            "",
        ),
        # An exception group's frames are drawn with "| ".
        (
            '  + Exception Group Traceback (most recent call last):\n  |   File "/srv/app/shop/payments.py", '
            "line 3, in charge\n  |     raise ExceptionGroup('x', [ValueError()])\n",
            "shop/payments.py:charge",
        ),
    ],
)
def test_user_frame_is_the_innermost_frame_of_the_jobs_own_code(traceback, expected):
    assert user_frame(traceback) == expected


def error(summary="ValueError: card 4242 declined", traceback=None, cls="builtins.ValueError"):
    return {
        "exception_class_path": cls,
        "summary": summary,
        "traceback": trace(WORKER, CHECKOUT) if traceback is None else traceback,
        "attempt": 3,
        "worker": "w",
    }


def test_a_fingerprint_is_sixteen_hex_digits():
    value = fingerprint(error())
    assert len(value) == LENGTH and int(value, 16) >= 0


@pytest.mark.parametrize(
    "other",
    [
        error(summary="ValueError: card 1111 declined"),
        error(traceback=trace(WORKER, CHECKOUT_MOVED)),  # another line, another release directory
        {**error(), "attempt": 1, "worker": "another", "at": "2026-12-06T08:00:00+00:00"},
    ],
)
def test_failures_that_differ_only_in_values_share_a_fingerprint(other):
    assert fingerprint(other) == fingerprint(error())


@pytest.mark.parametrize(
    "other",
    [
        error(cls="builtins.KeyError"),
        error(summary="ValueError: card 4242 expired"),
        error(traceback=trace(WORKER, REFUND)),
        error(traceback=trace(WORKER)),
    ],
)
def test_failures_of_another_class_message_or_frame_do_not(other):
    assert fingerprint(other) != fingerprint(error())


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (
            'IntegrityError: duplicate key value violates unique constraint "app_user_email_key"',
            'IntegrityError: duplicate key value violates unique constraint "app_order_pkey"',
        ),
        ("KeyError: 'email'", "KeyError: 'name'"),
        (
            "AttributeError: 'NoneType' object has no attribute 'email'",
            "AttributeError: 'NoneType' object has no attribute 'lower'",
        ),
        ("HTTPError: status=503", "HTTPError: status=401"),
        ("ValueError: It's broken, isn't it", "ValueError: It's gone, isn't it"),
    ],
)
def test_messages_naming_other_things_are_other_causes(one, other):
    assert fingerprint(error(summary=one)) != fingerprint(error(summary=other))


def test_a_record_with_missing_fields_still_has_one():
    assert len(fingerprint({})) == LENGTH
    assert fingerprint({"summary": None, "traceback": None}) == fingerprint({})
