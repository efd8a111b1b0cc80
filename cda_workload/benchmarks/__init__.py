"""Commands that measure (each prints figures and writes JSON): the paper's section 7 bench,
question latency against DuckDB, eager/compressed/confidence/integrity costs, coverage."""
