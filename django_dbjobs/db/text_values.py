"""How the database stores and compares text: NUL refused (PostgreSQL), keys folded (MySQL/MariaDB)."""

from __future__ import annotations

import unicodedata

from django.db import connections


def rejects_nul(using: str = "default") -> bool:
    """True where text and JSON columns cannot store U+0000 (PostgreSQL)."""
    return connections[using].vendor == "postgresql"


def key_fold(using: str = "default"):
    """How the database tells text keys apart, as a function making equal keys equal.

    MySQL/MariaDB: their default collations (``utf8mb4_general_ci``, ``..._0900_ai_ci``)
    ignore case, accents and trailing spaces, so ``GROUP BY`` returns one spelling of
    several; this folds them alike (a close approximation: keys it folds together that the
    collation tells apart only cost the admission a needless look). Elsewhere: as stored.
    """
    if connections[using].vendor != "mysql":
        return _same
    return _fold_like_collation


def _same(key: str) -> str:
    return key


def _fold_like_collation(key: str) -> str:
    decomposed = unicodedata.normalize("NFKD", key.casefold())
    return "".join(char for char in decomposed if not unicodedata.combining(char)).rstrip(" ")
