"""The ``al`` command: argument parsing, the lineage/report/export commands, task files,
progress on stderr, MLflow tracking of workload runs."""
