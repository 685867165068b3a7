#!/usr/bin/env bash
# Create the separate TRL environment .venv-trl/ that `make bench` compares against (idempotent).
#
#   bash scripts/setup_trl.sh          # `make bench` runs it first
#
# TRL is not a dependency of the course: it serves only as the baseline of benchmarks/bench.py
# (GRPOTrainer and SFTTrainer on the same work as the course's trainers). It lives in its own
# virtual environment so the course's .venv stays free of it. Steps: make the venv, install
# requirements-trl.txt (torch pinned to the CPU wheel), install this repository's course_lib
# editable without dependencies, then smoke-import trl. A stamp file records the hash of the
# requirements and of this script: a second run with nothing changed does nothing.
#
# Environment: PYTHON (interpreter to build the venv from, default python3),
#              TRL_VENV (where, default .venv-trl), FORCE=1 (rebuild from scratch).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${TRL_VENV:-.venv-trl}
REQ=requirements-trl.txt
STAMP="$VENV/.installed"
LOG="$VENV/install.log"

want=$(cat "$REQ" "$0" | sha256sum | cut -d' ' -f1)
if [[ "${FORCE:-0}" != 1 && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
    echo "TRL environment $VENV is up to date (delete it or set FORCE=1 to rebuild)"
    exit 0
fi

fail() {
    echo >&2
    echo "ERROR: setting up the TRL environment failed at step: $1" >&2
    if [[ -f "$LOG" ]]; then
        echo "------ last lines of $LOG ------" >&2
        tail -n 30 "$LOG" >&2
        echo "--------------------------------" >&2
    fi
    echo "Needs: Python 3.11 or 3.12, access to PyPI, ~1.5 GB of disk." >&2
    echo "Fix the cause above and re-run: bash scripts/setup_trl.sh (FORCE=1 to start over)." >&2
    exit 1
}

step() {  # step "description" command...
    local what=$1; shift
    echo "[trl] $what"
    echo "=== $what: $*" >>"$LOG"
    "$@" >>"$LOG" 2>&1 || fail "$what"
}

start=$(date +%s)
if [[ "${FORCE:-0}" == 1 ]]; then rm -rf "$VENV"; fi
rm -f "$STAMP"
"$PYTHON" -m venv "$VENV" || fail "create the virtual environment with $PYTHON"
: >"$LOG"
PIP=("$VENV/bin/python" -m pip)
step "upgrade pip and setuptools" "${PIP[@]}" install --upgrade pip "setuptools>=68" wheel
step "install $REQ (torch CPU wheel, trl; takes a few minutes)" "${PIP[@]}" install -r "$REQ"
step "install course_lib (editable, no deps)" \
    "${PIP[@]}" install --no-deps --no-build-isolation -e .
step "check the install" "$VENV/bin/python" -c "
import torch, transformers, trl, course_lib
from trl import GRPOConfig, GRPOTrainer, SFTConfig, SFTTrainer
assert '+cpu' in torch.__version__ or not torch.cuda.is_available(), torch.__version__
print('trl', trl.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)
"
tail -n 1 "$LOG"
echo "$want" >"$STAMP"
echo "[trl] ready in $(( $(date +%s) - start )) s: $VENV ($(du -sh "$VENV" | cut -f1))"
