#!/usr/bin/env bash
# The side-by-side benchmark (bench/run.py): sets up what is missing (scripts/setup.sh: packages,
# MariaDB source, build/tablesocket.so), then runs it. Arguments go to bench/run.py, e.g.
#   scripts/bench.sh                         # the full run: 1,000,000 rows, 10 s x 3 rounds (about 1 h)
#   scripts/bench.sh --rows 200000 --duration 5 --rounds 2
#   scripts/bench.sh --smoke                 # about 2 minutes
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/setup.sh" >&2
# shellcheck disable=SC1091
. "${TS_DEPS_DIR:-/var/cache/tablesocket}/env"
exec "$TS_VENV/bin/python" "$here/bench/run.py" "$@"
