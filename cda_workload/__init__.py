"""Workloads: the paper's loan example, TPC-H-style CDA queries, the benchmark runner."""
