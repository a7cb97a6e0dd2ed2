#!/usr/bin/env bash
# The main job on a fresh clone: install into .venv, then run the demo - an embedded
# Tansu broker, one worker, the sample answers in, verdicts and window aggregates out.
# Exits when everything came back (0) or on timeout (1); leaves no process behind.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/venv.sh
source scripts/venv.sh

exec .venv/bin/streamproc demo "$@"
