"""Everything that differs by database, and nothing else: here, what the rest of the package asks of it.

Each helper says which databases need it and why. Everything outside ``db/`` asks these
helpers (or Django's feature flags) instead of looking at the vendor. The helpers live in
modules named for what they hold; modules inside ``db/`` import from those, never from here.
"""

from __future__ import annotations

from .batch_counts import add_to_batch
from .claims import claim_jobs, claim_sql
from .clock import as_datetime, database_now, seconds_from_now
from .completions import WithoutLastWorker, finish_successes, finish_workflow_successes
from .errors import ErrorKind, error_kind, is_lock_conflict
from .idle_wakeups import (
    PROBE_STEPS,
    data_version,
    idle_check_steps,
    named_listen_alias,
    notify_workers,
    supports_listen,
    uses_data_version,
)
from .index_hints import ExistsOnIndex, pks_on_index
from .indexes import (
    ActiveJobsIndex,
    BatchJobsIndex,
    FailedJobsIndex,
    FinishedJobsIndex,
    KeyedJobsIndex,
    RatedJobsIndex,
    ReadyJobsIndex,
    RunningJobsIndex,
    UncountedEdgesIndex,
    UniqueKeyIndex,
)
from .lock_waits import never_waiting
from .migration_history import pending_migrations, read_migrations_ahead, require_migrated
from .planner import without_jit
from .row_locks import can_skip_locked, lock_or_skip
from .support import SQLITE_RECOMMENDED_OPTIONS, ensure_supported
from .text_values import key_fold, rejects_nul

__all__ = [
    "ExistsOnIndex",
    "PROBE_STEPS",
    "SQLITE_RECOMMENDED_OPTIONS",
    "ActiveJobsIndex",
    "BatchJobsIndex",
    "ErrorKind",
    "FailedJobsIndex",
    "FinishedJobsIndex",
    "KeyedJobsIndex",
    "RatedJobsIndex",
    "ReadyJobsIndex",
    "RunningJobsIndex",
    "UncountedEdgesIndex",
    "UniqueKeyIndex",
    "WithoutLastWorker",
    "add_to_batch",
    "as_datetime",
    "can_skip_locked",
    "claim_jobs",
    "claim_sql",
    "data_version",
    "database_now",
    "ensure_supported",
    "error_kind",
    "finish_successes",
    "finish_workflow_successes",
    "idle_check_steps",
    "is_lock_conflict",
    "named_listen_alias",
    "never_waiting",
    "key_fold",
    "lock_or_skip",
    "notify_workers",
    "pending_migrations",
    "read_migrations_ahead",
    "pks_on_index",
    "rejects_nul",
    "require_migrated",
    "seconds_from_now",
    "supports_listen",
    "uses_data_version",
    "without_jit",
]
