"""The cause of a failure: a 16-hex-digit fingerprint of its stored error record, pure.

Two dead letters share a fingerprint when they failed the same way: the same exception
class, the same message once the values that differ from job to job (numbers, hex, UUIDs,
ids, e-mail addresses, inside quotes too; an HTTP status is kept) are masked, raised from
the same function of the job's own code. The frame is the innermost one outside the
standard library, installed packages and django_dbjobs, named by its file's last two path
parts and its function, not its line number, so an edit elsewhere in the file or a deploy
to a new directory keeps the group. Everything comes from the stored record
(models/job.py's ``errors``), so rows written without one get the same fingerprint later
(migration 0004, then observability/missing_causes.py, fill them in).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

#: Length of a fingerprint: the column Job.error_fingerprint holds.
LENGTH = 16

#: Between two exceptions of a chain in a formatted traceback; the last one raised comes last.
_CHAIN_SEPARATORS = re.compile(
    r"^\s*(?:During handling of the above exception, another exception occurred:"
    r"|The above exception was the direct cause of the following exception:)\s*$",
    re.MULTILINE,
)
#: A frame line of a formatted traceback (an exception group's frames are prefixed with "| ").
_FRAME = re.compile(r'^[\s|+-]*File "(?P<file>[^"]*)", line \d+, in (?P<function>.+?)\s*$', re.MULTILINE)
#: Frames that are not the job's own code: the standard library, installed packages, ours.
_NOT_USER_CODE = re.compile(
    r"^<|(?:^|/)(?:site|dist)-packages/|/lib/python\d+(?:\.\d+)?/|/lib/pypy\d*(?:\.\d+)?/|/Lib/|(?:^|/)django_dbjobs/"
)

#: What differs between two failures of one cause, masked in this order. Quoted text is
#: masked like the rest, not whole: a quoted name (a key, an attribute, a constraint, a
#: table) tells causes apart, and an apostrophe ("isn't") quotes nothing.
_MASKS = [
    (re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b"), "<email>"),
    (
        re.compile(r"\b[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}\b"),
        "<uuid>",
    ),
    (re.compile(r"\b0[xX][0-9a-fA-F]+\b"), "<hex>"),
    (re.compile(r"\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b"), "<hex>"),
]
#: An HTTP status after "status", "status code" or "HTTP" (``status=503``, ``HTTP/1.1 404``):
#: kept, as 503 and 401 are two causes; any other number is masked.
_HTTP_STATUS = (
    r"(?P<status>(?i:\b(?:status(?:[ _]code)?|http(?:/\d(?:\.\d)?)?(?: status)?)\b\s*[=:]?\s*)"
    r"[1-5]\d\d)(?![\w.-])"
)
#: Numbers, then words with digits in them (ids: ``ord_8f3K2``, ``web-1``), in one pass.
_NUMBERS_AND_IDS = re.compile(
    _HTTP_STATUS + r"|(?P<n>(?<![\w-])\d+(?:\.\d+)*(?![\w-]))|(?P<id>[\w-]*\d[\w-]*)"
)
_SPACES = re.compile(r"\s+")
#: Enough of a message to tell causes apart; what follows often lists values.
_MESSAGE_CHARS = 500


def fingerprint(error: Mapping) -> str:
    """The fingerprint of a stored error record (``exception_class_path``, ``summary``, ``traceback``)."""
    parts = (
        str(error.get("exception_class_path") or ""),
        masked(str(error.get("summary") or "")),
        user_frame(str(error.get("traceback") or "")),
    )
    return hashlib.sha256("\n".join(parts).encode("utf-8", "replace")).hexdigest()[:LENGTH]


def masked(message: str) -> str:
    """`message` with the values that differ from one failure to the next masked."""
    text = message[: _MESSAGE_CHARS * 2]
    for pattern, replacement in _MASKS:
        text = pattern.sub(replacement, text)
    text = _NUMBERS_AND_IDS.sub(_number_or_id, text)
    return _SPACES.sub(" ", text).strip()[:_MESSAGE_CHARS]


def _number_or_id(match: re.Match) -> str:
    if match["status"]:
        return match["status"]
    return "<n>" if match["n"] else "<id>"


def user_frame(traceback: str) -> str:
    """``"dir/file.py:function"``: the innermost frame of the job's own code where the last
    exception of the chain was raised, or "" if it has none (raised by the worker, say)."""
    last = _CHAIN_SEPARATORS.split(traceback)[-1]
    frames = [match for match in _FRAME.finditer(last) if not _is_elsewhere(match["file"])]
    if not frames:
        return ""
    path = frames[-1]["file"].replace("\\", "/")
    return f"{'/'.join(path.split('/')[-2:])}:{frames[-1]['function']}"


def _is_elsewhere(path: str) -> bool:
    return bool(_NOT_USER_CODE.search(path.replace("\\", "/")))
