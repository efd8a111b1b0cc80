"""Where the store's files are: a path is data, never parsed as a URI it is not.

A local store is named ``file:`` + its absolute path exactly as the OS spells it (spaces,
quotes, ``%``, ``#``, non-ASCII letters as they are, never percent-encoded): Hadoop's
``Path(String)`` takes that form, and :func:`local_path` gives the path back unchanged. A URI
with another scheme is used only where the user wrote one. DuckDB receives paths as escaped
string literals (:func:`parquet_scan`), never spliced into its SQL.
"""

from __future__ import annotations

import os
import re

import pyarrow.fs as pafs

from segmenter.errors import LineageError

# Spark's Hadoop file system expands these in a path it reads, DuckDB the first three: a
# store whose path holds one could be written but not read back as the same files
GLOB_CHARACTERS = "*?[]{}\\"
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


class LocationError(LineageError):
    """A store path that Spark or DuckDB would read as a pattern, not as a path."""


def normalize_uri(uri: str) -> str:
    """``file:`` and the absolute path for a local path; a URI the user wrote (it has a
    scheme: ``s3a://b/s``, ``file:/tmp/s``) unchanged but for a trailing slash."""
    found = uri.rstrip("/") if _SCHEME.match(uri) else "file:" + os.path.abspath(uri)
    bad = sorted({c for c in found if c in GLOB_CHARACTERS})
    if bad:
        raise LocationError(
            f"store path {found!r} holds {' '.join(bad)}, which Spark and DuckDB read as file-name "
            "patterns; choose a folder without them"
        )
    return found


def local_path(uri: str) -> str | None:
    """The file-system path of a store location (``file:`` + the path as written); None for
    other file systems."""
    if not uri.startswith("file:"):
        return None
    path = uri[len("file:") :]
    return "/" + path.lstrip("/") if path.startswith("//") else path


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """A pyarrow file system and the path on it (a local path is not parsed as a URI: its
    ``#`` would be a fragment, its ``%20`` a space, its space a syntax error)."""
    path = local_path(uri)
    if path is not None:
        return pafs.LocalFileSystem(), path
    return pafs.FileSystem.from_uri(uri)


def sql_string(text: str) -> str:
    """A DuckDB string literal of ``text``."""
    return "'" + text.replace("'", "''") + "'"


def parquet_scan(folder: str) -> str:
    """DuckDB's ``read_parquet`` of the Parquet files of a local ``folder``."""
    return f"read_parquet({sql_string(os.path.join(folder, '*.parquet'))})"
