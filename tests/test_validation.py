import math

import pytest

from django_dbjobs import validation
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


def test_nul_is_allowed_where_the_database_stores_it():
    assert validation.json_value("a\x00", "x", reject_nul=False) == "a\x00"
