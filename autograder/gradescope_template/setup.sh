#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image from the zip (unpacked
# in /autograder/source): it installs what grading needs. Written by `make gradescope`.
#
# AUTOGRADER_ROOT (default /autograder) puts the environment elsewhere; AUTOGRADER_SETUP_APT=0
# skips apt-get (Python 3.11 or 3.12 with its venv module, bubblewrap and util-linux already there).
set -euo pipefail

ROOT="${AUTOGRADER_ROOT:-/autograder}"
SOURCE="$ROOT/source"
VENV="$ROOT/venv"
TORCH="@TORCH@"

if [ "${AUTOGRADER_SETUP_APT:-1}" != 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    # the course runs on Python 3.11 or 3.12: Ubuntu 24.04 has 3.12, 22.04 neither (deadsnakes has 3.11)
    if ! command -v python3.12 >/dev/null && ! command -v python3.11 >/dev/null; then
        apt-get install -y software-properties-common
        add-apt-repository -y ppa:deadsnakes/ppa
        apt-get update
        apt-get install -y python3.11
    fi
    PYTHON_NAME="$(basename "$(command -v python3.12 || command -v python3.11)")"
    apt-get install -y "$PYTHON_NAME-venv" util-linux passwd
    # the sandbox, where the container lets it make namespaces (run_autograder tries it per submission)
    apt-get install -y bubblewrap || echo "setup.sh: no bubblewrap: submissions will run as unprivileged ids"
fi

PYTHON="$(command -v python3.12 || command -v python3.11)"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --upgrade pip
# torch's CPU wheel first, from PyTorch's CPU index: from PyPI alone, pip would take the CUDA build
"$VENV/bin/python" -m pip install --index-url https://download.pytorch.org/whl/cpu "$TORCH"
# the course's pinned requirements (requirements-cpu.txt without the test tools); torch is already there
"$VENV/bin/python" -m pip install -r "$SOURCE/requirements.txt"

# where bubblewrap cannot run, each submission runs as numeric ids of its own (40000-49999, no
# passwd entry, none to create here: autograder/uids.py)

# the stubbed course_lib and the sandbox's copy of autograder, built once for every submission;
# this also fails the build here if the environment cannot grade
cd "$SOURCE/course"
PYTHONPATH="$SOURCE/course" "$VENV/bin/python" -m autograder.gradescope prepare --root "$ROOT"
