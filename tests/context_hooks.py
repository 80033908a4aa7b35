"""DBJOBS_CONTEXT_CAPTURE / DBJOBS_CONTEXT_RESTORE hooks used by the tests."""

import contextlib
import contextvars

request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)
#: What the restore hook saw, in order (for tests in this process).
restored: list = []


def capture():
    value = request_id.get()
    return None if value is None else {"request_id": value}


@contextlib.contextmanager
def restore(data):
    restored.append(data)
    if data.get("request_id") == "refuse":
        raise PermissionError("tenant unknown")
    token = request_id.set(data.get("request_id"))
    try:
        yield
    finally:
        request_id.reset(token)


def capture_not_json():
    return {"user": object()}


def capture_a_list():
    return ["not", "a", "dict"]


@contextlib.contextmanager
def restore_exits(data):
    raise SystemExit("the hook exits")
    yield


def restore_not_a_context_manager(data):
    return None
