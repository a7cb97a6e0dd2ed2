#!/usr/bin/env bash
# The static checks the style guide asks for, as CI runs them: ruff (lint and format),
# mypy (strict) over the package, its tests, scripts, benchmarks and model work, and the
# dependency rules (import-linter contracts in pyproject.toml). Needs .venv
# (scripts/test.sh makes it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/venv.sh
source scripts/venv.sh

.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy streamproc bench tests scripts modelwork
.venv/bin/lint-imports --no-cache
