#!/usr/bin/env bash
# One command on a fresh machine (Python 3.11 + Java 17): a virtualenv with the project and its test tools.
set -euo pipefail
cd "$(dirname "$0")"
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[dev]"
.venv/bin/python -c "import pyspark, segmenter, tracing; print('ready: pyspark', pyspark.__version__)"
