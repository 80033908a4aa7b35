"""How the admin writes a moment: the language's DATETIME_FORMAT to the second, date and time apart."""

import pytest

from django_dbjobs.admin.dates import split_at_time, with_seconds


@pytest.mark.parametrize(
    "language_format, to_the_second",
    [
        ("N j, Y, P", "N j, Y, g:i:s a"),  # en: 'Dec. 3, 2026, 8:04:14 a.m.'
        ("j. F Y H:i", "j. F Y H:i:s"),  # de
        (r"j \d\e F \d\e Y \a \l\a\s H:i", r"j \d\e F \d\e Y \a \l\a\s H:i:s"),  # es: escaped letters kept
        (r"j. E Y \k\e\l\l\o G.i", r"j. E Y \k\e\l\l\o G.i.s"),  # fi: the separator it uses
        ("Y년 n월 j일 g:i A", "Y년 n월 j일 g:i:s A"),  # ko
        ("j M Y, f", "j M Y, g:i:s"),
        ("Y-m-d H:i:s", "Y-m-d H:i:s"),  # seconds already: kept
        (r"\i Y", r"\i Y"),  # a literal i, no time
    ],
)
def test_with_seconds_adds_the_seconds_after_the_minutes(language_format, to_the_second):
    assert with_seconds(language_format) == to_the_second


@pytest.mark.parametrize(
    "date_format, parts",
    [
        ("N j, Y, g:i:s a", ("N j, Y, ", "g:i:s a")),
        ("Y年n月j日G:i:s", ("Y年n月j日", "G:i:s")),
        (r"j \d\e F \d\e Y \a \l\a\s H:i:s", (r"j \d\e F \d\e Y \a \l\a\s ", "H:i:s")),
        ("j M Y H:i:s T", ("j M Y ", "H:i:s T")),  # a timezone after the time stays with it
        ("H:i:s j.n.Y", ("", "H:i:s j.n.Y")),  # the time first: one piece
        ("Y-m-d", ("", "Y-m-d")),
    ],
)
def test_split_at_time_parts_the_date_from_the_time(date_format, parts):
    assert split_at_time(date_format) == parts
