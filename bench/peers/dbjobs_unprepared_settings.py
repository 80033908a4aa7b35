"""django-dbjobs in the side-by-side benchmark with prepared statements turned off
(``DBJOBS_PREPARED_STATEMENTS = False``, as behind a transaction-mode pooler)."""

from dbjobs_settings import *  # noqa: F403

DBJOBS_PREPARED_STATEMENTS = False
