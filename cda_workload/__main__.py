"""``python -m cda_workload``: the same commands as ``al`` (see :mod:`cda_workload.cli`)."""

import sys

from cda_workload.cli import main

if __name__ == "__main__":
    sys.exit(main())
