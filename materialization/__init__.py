"""Run tasks under the Rerun / Full / Function Materialization strategies and restore
intermediate results from the Parquet results store. Nothing is imported here: a command
that only reads run records (``materialization.catalog``) loads neither Spark nor DuckDB."""
