"""``python -m cda_workload``: the same commands as ``al`` (see :mod:`cda_workload.command_line.cli`)."""

import sys

from cda_workload.command_line.entry import main

if __name__ == "__main__":
    sys.exit(main())
