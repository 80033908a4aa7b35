"""JSON data a job's row stores: checked before it is written (arguments, return values, checkpoints)."""

from __future__ import annotations

import math
from typing import Any

from ..exceptions import InvalidJobArguments


def json_value(value: Any, where: str, reject_nul: bool, clean: bool = False) -> Any:
    """Return `value` as plain JSON data (tuples become lists), or raise.

    Raises InvalidJobArguments naming the place (`where`) of the first value that
    would not come back the same from JSON: NaN and infinities, non-string keys,
    objects JSON has no type for (in Django's words too), lone surrogates (no database
    stores them), and U+0000 where the database cannot store it. With `clean` (a return
    value: the job has already run), such characters are replaced with U+FFFD instead.
    """
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidJobArguments(f"{where} is {value!r}, which JSON cannot represent.")
        return value
    if isinstance(value, str):
        return text(value, where, reject_nul, clean)
    if isinstance(value, list | tuple):
        return [json_value(item, f"{where}[{i}]", reject_nul, clean) for i, item in enumerate(value)]
    if isinstance(value, dict):
        result = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidJobArguments(
                    f"{where} has the key {short(key)}; JSON object keys must be strings."
                )
            result[text(key, f"{where} key {short(key)}", reject_nul, clean)] = json_value(
                item, f"{where}[{short(key)}]", reject_nul, clean
            )
        return result
    advice = (
        "Return ids, strings, numbers, lists and dicts."
        if clean
        else "Pass ids, strings and numbers, and load objects inside the job."
    )
    # The last sentence is Django's normalize_json() error, which Django's own tests of a
    # backend look for; type.__repr__, as a metaclass's __repr__ could raise.
    raise InvalidJobArguments(
        f"{where} is {article(type(value).__name__)}, which is not JSON data. {advice} "
        f"Unsupported type: {type.__repr__(type(value))}."
    )


def text(value: str, where: str, reject_nul: bool, clean: bool) -> str:
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            if not clean:
                raise InvalidJobArguments(
                    f"{where} contains a lone surrogate (an unpaired U+D800-U+DFFF code point), which "
                    "no database stores. Decode bytes with errors='replace', or pass them as base64."
                ) from None
            value = str(value).encode("utf-8", "replace").decode("utf-8")
    if reject_nul and "\x00" in value:
        if not clean:
            raise InvalidJobArguments(
                f"{where} contains a NUL character (\\x00), which PostgreSQL cannot store."
            )
        value = str.replace(str(value), "\x00", "\ufffd")
    return value


def article(noun: str) -> str:
    """'a set', 'an object', 'an Order'."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def short(value: Any, limit: int = 40) -> str:
    """repr() of `value`, shortened for an error message."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 4]}...{text[-1]}"
