"""What the admin shows of a job's arguments and return value: secrets masked."""

from __future__ import annotations

import inspect
from typing import Any

from ..conf import settings
from .known_jobs import known_jobs

MASK = "********"


def masked_job(name: str) -> bool:
    return name in settings.ADMIN_MASKED_JOBS


def secret_name(name: Any) -> bool:
    """True if an argument or key called `name` holds a secret (DBJOBS_ADMIN_MASKED_ARGUMENTS)."""
    lowered = str(name).lower()
    return any(part.lower() in lowered for part in settings.ADMIN_MASKED_ARGUMENTS)


def mask_value(value: Any) -> Any:
    """`value` with every dict entry whose key names a secret masked, at any depth."""
    if isinstance(value, dict):
        return {key: MASK if secret_name(key) else mask_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [mask_value(item) for item in value]
    return value


def masked_arguments(name: str, args: Any, kwargs: Any) -> tuple[Any, Any]:
    """(args, kwargs) as the admin shows them; positional ones masked by their parameter's name."""
    if masked_job(name):
        return MASK, MASK
    names = _parameter_names(name)
    if isinstance(args, list):
        args = [
            MASK if index < len(names) and secret_name(names[index]) else mask_value(item)
            for index, item in enumerate(args)
        ]
    return args, mask_value(kwargs)


def masked_return_value(name: str, value: Any) -> Any:
    return MASK if masked_job(name) else mask_value(value)


def _parameter_names(name: str) -> list[str]:
    """The positional parameters of a registered job, [] if this process does not know it."""
    registered = known_jobs().get(name)
    try:
        parameters = inspect.signature(registered.func).parameters.values() if registered else []
    except (TypeError, ValueError):
        return []
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [parameter.name for parameter in parameters if parameter.kind in positional]
