"""TPC-H data through ``tpchgen-cli`` (no network needed), registered with primary keys."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tracing.session import LineageSession

PRIMARY_KEYS: dict[str, tuple[str, ...]] = {
    "region": ("r_regionkey",),
    "nation": ("n_nationkey",),
    "supplier": ("s_suppkey",),
    "customer": ("c_custkey",),
    "part": ("p_partkey",),
    "partsupp": ("ps_partkey", "ps_suppkey"),
    "orders": ("o_orderkey",),
    "lineitem": ("l_orderkey", "l_linenumber"),
}


def generate(scale_factor: float, out_dir: str | Path) -> Path:
    """Parquet files for every TPC-H table at ``scale_factor`` (reused if already there)."""
    out = Path(out_dir)
    if all((out / f"{t}.parquet").exists() for t in PRIMARY_KEYS):
        return out
    exe = shutil.which("tpchgen-cli") or str(Path(sys.executable).with_name("tpchgen-cli"))
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([exe, "parquet", "-s", str(scale_factor), f"--output-dir={out}"], check=True)
    return out


def register_tpch(
    als: LineageSession, data_dir: str | Path, tables: tuple[str, ...] = tuple(PRIMARY_KEYS)
) -> None:
    """Register the generated tables as sources keyed by their primary keys."""
    for table in tables:
        als.register_table(table, str(Path(data_dir).resolve() / f"{table}.parquet"), key=PRIMARY_KEYS[table])
