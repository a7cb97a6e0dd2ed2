#!/usr/bin/env bash
# The unit suite on the other Pythons streamproc supports (3.12 and 3.13; the full suite
# runs on 3.11, scripts/test.sh). Each version found gets its own .venv-py<version> with
# streamproc[dev] installed; the suites run side by side (one pytest process each), and each
# version not found is skipped with the reason printed. Arguments go to pytest (default:
# tests/unit tests/bench -q -m 'not slow and not timing and not outside_tool': those run
# on 3.11). Exit status: non-zero if any version that ran failed. .ci/run splits the work
# in three steps:
#   --prepare    only the requirements, every version side by side (nothing is written
#                into the checkout, so this may run while anything else does)
#   --install    only streamproc itself, editable, one version after another (it writes
#                streamproc.egg-info into the checkout, so nothing else may build then)
#   --installed  only the suites: the venvs already hold streamproc
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; }

VERSIONS=(3.12 3.13)
mode=all
case ${1:-} in
    --prepare | --install | --installed)
        mode=${1#--}
        shift
        ;;
esac
args=("$@")
[[ ${#args[@]} -gt 0 ]] || args=(tests/unit tests/bench -q -p no:cacheprovider -m 'not slow and not timing and not outside_tool')

# An interpreter that really runs: python3.X on PATH (a pyenv shim for a version that is
# not selected fails), else pyenv's own install of it.
find_python() {
    local version=$1 candidate
    for candidate in "python${version}" "${PYENV_ROOT:-${HOME}/.pyenv}"/versions/"${version}".*/bin/"python${version}"; do
        if command -v "${candidate}" >/dev/null 2>&1 \
            && "${candidate}" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '${version}'.split('.'))))" 2>/dev/null; then
            command -v "${candidate}"
            return 0
        fi
    done
    return 1
}

# streamproc[dev]'s requirements, streamproc itself left out.
requirements() {
    "$1" -c '
import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
wanted = list(project["dependencies"])
for extra in ("aegis", "demo", "dev"):
    wanted += [d for d in project["optional-dependencies"][extra] if not d.startswith("streamproc")]
print("\n".join(wanted))
'
}

prepare_version() {
    local python=$1 venv=$2 wanted
    if [[ ! -x ${venv}/bin/python ]]; then
        "${python}" -m venv "${venv}"
    fi
    wanted=$(mktemp)
    requirements "${python}" >"${wanted}"
    "${venv}/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile -r "${wanted}"
    rm -f "${wanted}"
}

install_version() {
    local python=$1 venv=$2
    if [[ ! -x ${venv}/bin/python ]]; then
        "${python}" -m venv "${venv}"
    fi
    "${venv}/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile -e '.[dev]'
}

# Requirements side by side; installs one after another (an editable install writes into
# the checkout); then the suites side by side.
pids=()
names=()
logs=()
for version in "${VERSIONS[@]}"; do
    if ! python=$(find_python "${version}"); then
        log "SKIPPED Python ${version}: no python${version} on PATH or under pyenv's versions"
        continue
    fi
    venv=".venv-py${version}"
    out=$(mktemp)
    if [[ ${mode} == prepare ]]; then
        log "Python ${version} (${python}): installing streamproc[dev]'s requirements into ${venv}"
        prepare_version "${python}" "${venv}" >"${out}" 2>&1 &
        pids+=("$!")
        names+=("${version}")
        logs+=("${out}")
        continue
    fi
    if [[ ${mode} != installed ]]; then
        log "Python ${version} (${python}): installing streamproc[dev] into ${venv}"
        install_version "${python}" "${venv}"
    fi
    if [[ ${mode} == install ]]; then
        rm -f "${out}"
        continue
    fi
    if [[ ! -x ${venv}/bin/python ]]; then
        log "Python ${version}: ${venv} is missing (run with --prepare and --install first)"
        rc_missing=1
        rm -f "${out}"
        continue
    fi
    "${venv}/bin/python" -m pytest "${args[@]}" >"${out}" 2>&1 &
    pids+=("$!")
    names+=("${version}")
    logs+=("${out}")
done

rc=${rc_missing:-0}
for i in "${!pids[@]}"; do
    status=0
    wait "${pids[$i]}" || status=$?
    log "Python ${names[$i]}: exit ${status}; its output:"
    tail -n 40 "${logs[$i]}" >&2
    rm -f "${logs[$i]}"
    [[ ${status} -eq 0 ]] || rc=1
done
exit "${rc}"
