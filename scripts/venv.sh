# Sourced by test.sh, lint.sh and demo.sh: make .venv (Python 3.11) if missing and install
# streamproc into it with the extras that venv_extras names (default dev: the tests' and
# checks' tools, which include the demo and aegis extras; demo.sh sets demo, the embedded
# broker only). Works from a fresh clone.
# shellcheck shell=bash

log() { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; }

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

extras=${venv_extras:-dev}
log "installing streamproc[${extras}] into .venv"
# --no-compile: pip would byte-compile every file of every dependency; Python compiles the
# modules a run imports when it imports them.
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-compile -e ".[${extras}]"
