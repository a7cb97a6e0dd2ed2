#!/usr/bin/env bash
# Run the test suite from a fresh clone: make .venv (Python 3.11) if missing, install the
# package with its dev extras, then run pytest - unit and integration tests alike (the
# integration fixtures start Kafka and Tansu themselves). Arguments go to pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf 'test.sh: %s\n' "$*" >&2; }

is_py311() { "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; }

if [[ ! -x .venv/bin/python ]]; then
    py=""
    for candidate in "${PYTHON_BIN:-}" python3.11 python3; do
        if [[ -n "${candidate}" ]] && command -v "${candidate}" >/dev/null && is_py311 "${candidate}"; then
            py=${candidate}
            break
        fi
    done
    [[ -n "${py}" ]] || { log "Python 3.11 not found (set PYTHON_BIN)"; exit 1; }
    log "creating .venv with $(command -v "${py}")"
    "${py}" -m venv .venv
fi
is_py311 .venv/bin/python || { log ".venv is not Python 3.11; remove it and rerun"; exit 1; }

log "installing streamproc[dev] into .venv"
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'

rc=0
.venv/bin/python -m pytest "$@" || rc=$?
if [[ ${rc} -eq 5 ]]; then
    log "pytest collected no tests: treating that as a failure"
fi
exit "${rc}"
