"""One of several processes writing one results store at once (test_store_trust): each round
registers the shared table ``shared`` (its rows name the writer and round) and runs a task
over whatever snapshot is then current, printing each run's id as soon as it is committed.

Usage: python -m tests.concurrent_writer STORE WRITER ROUNDS
"""

from __future__ import annotations

import sys

import pandas as pd

from tracing import LineageSession


def main(store: str, writer: str, rounds: int) -> None:
    als = LineageSession(store=store, mlflow=False)
    for i in range(rounds):
        frame = pd.DataFrame({"id": range(6), "w": writer, "v": [i] * 3 + [i + 1] * 3})
        als.register_table("shared", frame, key="id")
        run = als.run(als.table("shared").groupBy("w", "v").count())
        print(run.id, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
