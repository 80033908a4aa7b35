import datetime
import json
import math

import pytest

from django_dbjobs.enqueuing import validation
from django_dbjobs.exceptions import InvalidJobArguments


@pytest.mark.parametrize(
    "value, expected",
    [
        (None, None),
        (True, True),
        (3, 3),
        (2.5, 2.5),
        ("text", "text"),
        ((1, (2, 3)), [1, [2, 3]]),
        ({"a": [1, {"b": None}]}, {"a": [1, {"b": None}]}),
    ],
)
def test_json_value_keeps_plain_data(value, expected):
    assert validation.json_value(value, "x", reject_nul=True) == expected


@pytest.mark.parametrize(
    "value, where",
    [
        (math.nan, "x"),
        (-math.inf, "x"),
        ([1, {"k": math.nan}], "x[1]['k']"),
        ({1: 2}, "x has the key 1"),
        ({"a": {1, 2}}, "x['a']"),
        (b"bytes", "x"),
        ("nul\x00", "x"),
    ],
)
def test_json_value_names_the_first_bad_place(value, where):
    with pytest.raises(InvalidJobArguments) as raised:
        validation.json_value(value, "x", reject_nul=True)
    assert str(raised.value).startswith(where)


@pytest.mark.parametrize(
    "value, message",
    [
        ({"sent": {1, 2}}, "its return value['sent'] is a set, which is not JSON data. Return ids,"),
        ([1, math.nan], "its return value[1] is nan, which JSON cannot represent."),
        ({1: "a"}, "its return value has the key 1; JSON object keys must be strings."),
    ],
)
def test_a_return_value_that_is_not_json_raises_a_plain_type_error(value, message):
    with pytest.raises(TypeError) as raised:
        validation.return_value(value, reject_nul=True)
    assert type(raised.value) is TypeError, "recorded as Django's task backends record it"
    assert str(raised.value).startswith(f"The job ran, but {message}")


def test_an_object_json_has_no_type_for_is_named_in_djangos_words_too():
    with pytest.raises(TypeError) as raised:
        validation.payload((datetime.date(2030, 1, 2),), {}, reject_nul=True)
    assert str(raised.value) == (
        "args[0] is a date, which is not JSON data. Pass ids, strings and numbers, and load "
        "objects inside the job. Unsupported type: <class 'datetime.date'>."
    )


def test_nul_is_allowed_where_the_database_stores_it():
    assert validation.json_value("a\x00", "x", reject_nul=False) == "a\x00"


@pytest.mark.parametrize(
    "args",
    [
        (),
        (1,),
        ("ascii", 'quote " back \\ slash', "\n\t\x01\x7f", "", 0, -7, 10**30, None),
        ("plain", "é ü \u2603", 'quote " back \\ slash', "\n\t\x01", "", 0, -7, 10**30, None),
        (1.5, True, False),
        ([1, "two"], {"k": [None]}),
        (("tuple", 1),),
    ],
)
def test_positional_payload_text_is_what_save_stores_and_its_limit_is_payloads(args, settings):
    from django_dbjobs.enqueuing import validation
    from django_dbjobs.exceptions import PayloadTooLarge

    clean, text = validation.positional_payload(args, reject_nul=False)
    assert clean == validation.payload(args, {}, reject_nul=False)[0]
    assert text == json.dumps(clean)  # as a JSONField stores it: exact lookups match
    assert json.loads(text) == clean
    size = len(json.dumps([clean, {}], separators=(",", ":")))
    settings.DBJOBS_MAX_PAYLOAD_BYTES = size
    validation.positional_payload(args, reject_nul=False)
    validation.payload(args, {}, reject_nul=False)
    settings.DBJOBS_MAX_PAYLOAD_BYTES = size - 1
    for check in (validation.positional_payload, lambda a, reject_nul: validation.payload(a, {}, reject_nul)):
        with pytest.raises(PayloadTooLarge):
            check(args, reject_nul=False)


@pytest.mark.parametrize("args", [("a\x00b",), (1, "ok", "\x00")])
def test_positional_payload_refuses_nul_where_the_database_cannot_store_it(args):
    from django_dbjobs.enqueuing import validation
    from django_dbjobs.exceptions import InvalidJobArguments

    with pytest.raises(InvalidJobArguments, match=r"args\[\d\] contains a NUL"):
        validation.positional_payload(args, reject_nul=True)
    assert validation.positional_payload(args, reject_nul=False)[1] == json.dumps(list(args))
