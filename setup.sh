#!/usr/bin/env bash
# One command on a fresh machine (Python 3.11 + Java 17): a virtualenv with the project and its test tools,
# and Debian's chromium for the audit-report browser tests (installed when missing and we are root).
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v chromium >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    else
        echo "note: chromium not found; the browser tests of the audit report will be skipped" >&2
    fi
fi
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[dev]"
.venv/bin/python -c "import pyspark, segmenter, tracing; print('ready: pyspark', pyspark.__version__)"
