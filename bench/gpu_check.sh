#!/usr/bin/env bash
# The GPU path in one call (bench/gpu_check.py): the fingerprint twice, the default reversal
# training with its steps/s and golden rows, 8 ensemble seeds at once on the one GPU, and
# the device's identity, as one Markdown table. About 5 minutes at most on one GPU.
#
#   bash bench/gpu_check.sh                                     on a machine with a GPU
#   bash bench/gpu_check.sh --device cpu --steps 5 --seeds 2    the same table on the CPU
#
# PYTHON names the interpreter (default: the checkout's .venv, else python3).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${PYTHON:-}" ]]; then
    PYTHON=python3
    [[ -x .venv/bin/python ]] && PYTHON=.venv/bin/python
fi
exec "$PYTHON" bench/gpu_check.py "$@"
