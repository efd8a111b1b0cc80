"""What tools outside (MLflow, OpenLineage) name a task by: its name as people call it, not
an opaque id and the same for every run of the same task, and the tables it reads with the
user's columns."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from segmenter import operators as ops


def task_name(record: Mapping[str, Any], task: ops.Task) -> str:
    """The task's name: the one its run was given, else the function its code defines, else
    ``al.<tables read>.<digest>`` (the digest is of the tree with the user's names, so the
    same task is the same job in every run)."""
    given = record.get("name") or _defined_function(task)
    if given:
        return given
    tables = dict.fromkeys(n.table for n in task.root.walk() if isinstance(n, ops.Source))
    digest = hashlib.sha256(ops.pretty(task.render()).encode()).hexdigest()[:8]
    return f"al.{'_'.join(tables)}.{digest}"


def _defined_function(task: ops.Task) -> str | None:
    """The first function a code task defines, other than a task file's ``task``."""
    if task.language != "code" or not task.text:
        return None
    names = re.findall(r"^def\s+([A-Za-z_]\w*)\s*\(", task.text, flags=re.MULTILINE)
    return next((n for n in names if n != "task"), None)


def tables_read(task: ops.Task) -> dict[str, list[ops.Col]]:
    """Each table the task reads (once, though a self-join reads it twice), with the user's
    columns: not the row id this project adds to files read in place."""
    read: dict[str, list[ops.Col]] = {}
    for node in task.root.walk():
        if isinstance(node, ops.Source) and node.table not in read:
            hidden = node.files is not None and node.files.row_id
            read[node.table] = list(node.cols[:-1] if hidden else node.cols)
    return read
