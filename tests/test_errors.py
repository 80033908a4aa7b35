"""db.errors.classify(): what a database error means, per database and driver code (no database)."""

import sqlite3

import pytest
from django.db import utils

from django_dbjobs.db.errors import ErrorKind, classify


def wrapped(django_class, cause):
    """A Django database error as Django raises it: the driver's error as its cause."""
    exc = django_class(*getattr(cause, "args", ()))
    exc.__cause__ = cause
    return exc


def pg(sqlstate, django_class=utils.OperationalError):
    psycopg = pytest.importorskip("psycopg")
    return wrapped(django_class, psycopg.errors.lookup(sqlstate)("message"))


def mysql(code, django_class=utils.OperationalError):
    mysqldb = pytest.importorskip("MySQLdb")
    return wrapped(django_class, mysqldb.OperationalError(code, "message"))


def lite(message, django_class=utils.OperationalError):
    return wrapped(django_class, sqlite3.OperationalError(message))


CASES = [
    ("postgresql", lambda: pg("57P01"), ErrorKind.OUTAGE),  # admin shutdown
    ("postgresql", lambda: pg("08006"), ErrorKind.OUTAGE),  # connection failure
    ("postgresql", lambda: pg("40P01"), ErrorKind.OUTAGE),  # deadlock
    ("postgresql", lambda: pg("40001"), ErrorKind.OUTAGE),  # serialization failure
    ("postgresql", lambda: pg("55P03"), ErrorKind.OUTAGE),  # lock not available
    ("postgresql", lambda: pg("54001"), ErrorKind.DATA),  # too deep: the value's fault
    ("postgresql", lambda: pg("22P02", utils.DataError), ErrorKind.DATA),
    ("postgresql", lambda: pg("23514", utils.IntegrityError), ErrorKind.DATA),
    ("postgresql", lambda: pg("42P01", utils.ProgrammingError), ErrorKind.SETUP),  # no table
    ("postgresql", lambda: utils.OperationalError("the connection is closed"), ErrorKind.OUTAGE),
    ("mysql", lambda: mysql(2006), ErrorKind.OUTAGE),  # server has gone away
    ("mysql", lambda: mysql(2013), ErrorKind.OUTAGE),  # lost connection
    ("mysql", lambda: mysql(1205), ErrorKind.OUTAGE),  # lock wait timeout
    ("mysql", lambda: mysql(1213), ErrorKind.OUTAGE),  # deadlock
    ("mysql", lambda: mysql(1021), ErrorKind.OUTAGE),  # disk full: wait it out
    ("mysql", lambda: mysql(4025), ErrorKind.DATA),  # MariaDB CHECK (JSON_VALID) failed
    ("mysql", lambda: mysql(3140), ErrorKind.DATA),  # MySQL invalid JSON
    ("mysql", lambda: mysql(1366), ErrorKind.DATA),  # incorrect string value
    ("mysql", lambda: mysql(1054), ErrorKind.SETUP),  # unknown column
    ("mysql", lambda: mysql(1146, utils.ProgrammingError), ErrorKind.SETUP),  # no table
    ("mysql", lambda: utils.InterfaceError(0, ""), ErrorKind.OUTAGE),
    ("sqlite", lambda: lite("database is locked"), ErrorKind.OUTAGE),
    ("sqlite", lambda: lite("disk I/O error"), ErrorKind.OUTAGE),
    ("sqlite", lambda: lite("no such table: django_dbjobs_job"), ErrorKind.SETUP),
    ("sqlite", lambda: lite("table django_dbjobs_job has no column named pickups"), ErrorKind.SETUP),
    (
        "sqlite",
        lambda: lite("Cannot operate on a closed database.", utils.ProgrammingError),
        ErrorKind.OUTAGE,
    ),
    ("sqlite", lambda: lite("Incorrect number of bindings", utils.ProgrammingError), ErrorKind.SETUP),
    ("sqlite", lambda: wrapped(utils.IntegrityError, sqlite3.IntegrityError("CHECK")), ErrorKind.DATA),
    ("sqlite", lambda: UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"), ErrorKind.DATA),
    ("postgresql", lambda: TypeError("Object of type object is not JSON serializable"), ErrorKind.DATA),
]


@pytest.mark.parametrize("vendor, make, kind", CASES, ids=[f"{c[0]}-{n}" for n, c in enumerate(CASES)])
def test_errors_are_classified_by_driver_code(vendor, make, kind):
    assert classify(make(), vendor) is kind
