#!/usr/bin/env bash
# Run the test suite from a fresh clone: make .venv (Python 3.11) if missing, install the
# package with its dev extras, then run pytest - unit and integration tests alike (the
# integration fixtures start Kafka and Tansu themselves). Arguments go to pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/venv.sh
source scripts/venv.sh

rc=0
.venv/bin/python -m pytest "$@" || rc=$?
if [[ ${rc} -eq 5 ]]; then
    log "pytest collected no tests: treating that as a failure"
fi
exit "${rc}"
