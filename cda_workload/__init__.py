"""Workloads (``workloads/``), the benchmarks that run them (``benchmarks/``) and the ``al``
command line (``command_line/``)."""
