"""The check of DBJOBS_ names: a setting django-dbjobs does not read is a typo or an old name."""

import difflib

from django.conf import settings as django_settings
from django.core import checks

from ..conf import DEFAULTS

#: Settings that were renamed before a release: the name to use now.
RENAMED = {"DBJOBS_PREPARED_CLAIMS": "DBJOBS_PREPARED_STATEMENTS"}


def unknown_setting_warnings() -> list[checks.Warning]:
    """A ``DBJOBS_`` setting django-dbjobs does not read: a typo or an old name, silently ignored."""
    known = {f"DBJOBS_{name}" for name in DEFAULTS}
    warnings = []
    for name in sorted(dir(django_settings)):
        if not name.startswith("DBJOBS_") or name in known:
            continue
        close = RENAMED.get(name)
        if close is None:  # the part after the prefix, which every name shares
            matches = difflib.get_close_matches(name[len("DBJOBS_") :], sorted(DEFAULTS), n=1, cutoff=0.75)
            close = f"DBJOBS_{matches[0]}" if matches else None
        warnings.append(
            checks.Warning(
                f"{name} is not a django-dbjobs setting; it has no effect.",
                hint=f"Did you mean {close}?"
                if close
                else "The settings are listed in the settings reference.",
                id="dbjobs.W003",
            )
        )
    return warnings
