"""What a database error means: an outage to wait out, bad data, or a setup problem.

Retrying every error turns one value the database refuses into a stalled worker, and
failing on every error turns a restart into lost attempts. Drivers do not agree on the
exception class (MariaDB reports a failed CHECK as OperationalError, SQLite reports a
missing table as OperationalError), so the codes decide, per database.
"""

from __future__ import annotations

import enum

from django.db import (
    DatabaseError,
    DataError,
    IntegrityError,
    InterfaceError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
    connections,
)


class ErrorKind(enum.Enum):
    #: The database went away, a lock or statement timed out, a deadlock, a
    #: serialization failure: try again later, nothing is wrong with the data.
    OUTAGE = "outage"
    #: A value the database (or its driver) refuses: fail the one job it belongs to.
    DATA = "data"
    #: Tables or columns missing, a feature missing: no retry will help.
    SETUP = "setup"


# PostgreSQL SQLSTATE classes of OperationalError that are not outages.
_PG_DATA_CLASSES = {"54"}  # program limit exceeded: a value too deep or too large
# MySQL/MariaDB server errors caused by a value (mysqlclient raises several of them as
# OperationalError); any other server error is taken for an outage, as on PostgreSQL.
_MYSQL_DATA = {
    1048,  # column cannot be null
    1153,  # packet bigger than max_allowed_packet: the value is too large
    1264,  # out of range
    1265,  # data truncated
    1292,  # incorrect value
    1366,  # incorrect string value
    1406,  # data too long
    1690,  # value out of range
    3140,  # MySQL: invalid JSON text
    3819,  # MySQL: CHECK constraint violated
    4025,  # MariaDB: CONSTRAINT failed (the JSON_VALID check of a JSON column)
    4038,  # MariaDB: syntax error in JSON text
}
_MYSQL_SETUP = {1049, 1054, 1146}  # unknown database, unknown column, no such table
_SQLITE_SETUP = ("no such table", "no such column", "has no column named")


def error_kind(exc: BaseException, using: str = "default") -> ErrorKind:
    """Whether `exc` is an outage (wait it out), bad data (fail one job) or a setup error."""
    return classify(exc, connections[using].vendor)


def classify(exc: BaseException, vendor: str) -> ErrorKind:
    """Say what `exc`, raised while talking to a `vendor` database, means for a retry."""
    if isinstance(exc, InterfaceError):
        return ErrorKind.OUTAGE
    if isinstance(exc, DataError | IntegrityError):
        return ErrorKind.DATA
    if not isinstance(exc, DatabaseError):
        # Raised before the value reached the server: a lone surrogate the driver
        # cannot encode, JSON that cannot be written, a number out of range.
        return ErrorKind.DATA
    if isinstance(exc, NotSupportedError):
        return ErrorKind.SETUP
    cause = exc.__cause__
    if vendor == "postgresql":
        code = getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None) or ""
        if isinstance(exc, ProgrammingError):
            return ErrorKind.SETUP
        if code[:2] in _PG_DATA_CLASSES:
            return ErrorKind.DATA
        return ErrorKind.OUTAGE  # connection, shutdown, resources, lock and rollback classes
    if vendor == "mysql":
        args = getattr(cause, "args", None) or exc.args
        code = args[0] if args and isinstance(args[0], int) else None
        if code in _MYSQL_SETUP:
            return ErrorKind.SETUP
        if code in _MYSQL_DATA:
            return ErrorKind.DATA
        if isinstance(exc, ProgrammingError) and code is not None and code < 2000:
            return ErrorKind.SETUP
        return ErrorKind.OUTAGE  # lost connections, timeouts, deadlocks, a full disk, ...
    if vendor == "sqlite":
        message = str(exc).lower()
        if any(text in message for text in _SQLITE_SETUP):
            return ErrorKind.SETUP
        if isinstance(exc, ProgrammingError) and "closed" not in message:
            return ErrorKind.SETUP  # wrong bindings, too many variables: a bug, not an outage
        return ErrorKind.OUTAGE  # locked, busy, disk I/O, a closed connection
    return ErrorKind.OUTAGE if isinstance(exc, OperationalError) else ErrorKind.SETUP


#: PostgreSQL's deadlock, lock-timeout and serialization failures; MySQL's deadlock and lock wait timeout.
_LOCK_SQLSTATES = {"40P01", "55P03", "40001"}
_LOCK_MYSQL_CODES = {1213, 1205}


def is_lock_conflict(exc: BaseException) -> bool:
    """Whether `exc` says a transaction lost a lock conflict (a deadlock, a lock wait that
    timed out, SQLite's busy database): safe to run again, since it changed nothing."""
    cause = exc.__cause__ or exc
    if getattr(cause, "sqlstate", None) in _LOCK_SQLSTATES:
        return True
    args = getattr(cause, "args", ())
    if args and args[0] in _LOCK_MYSQL_CODES:
        return True
    return "database is locked" in str(exc)
