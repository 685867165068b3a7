#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image from the zip (unpacked
# in /autograder/source): it installs what grading needs. Written by `make gradescope`.
#
# The grading side runs on CPython 3.11, the Python of the lock (requirements.lock: every package's
# exact version and wheel hash, for 3.11.0 and later on Linux x86_64). Ubuntu 22.04, Gradescope's
# newest image, has python3.11 in its own archive (universe, jammy-updates: 3.11.0~rc1); an image
# whose archive has no python3.11 fails here, at the apt-get line.
#
# AUTOGRADER_ROOT (default /autograder) puts the environment elsewhere; AUTOGRADER_SETUP_APT=0
# skips apt-get (python3.11 with its venv module, util-linux and bubblewrap already there);
# AUTOGRADER_TORCH_INDEX (default PyTorch's CPU index) is the package index torch's CPU wheel comes
# from: any index that holds the same file (pip checks its hash against the lock).
set -Eeuo pipefail
trap 'status=$?; echo "setup.sh: line $LINENO failed (exit $status): $BASH_COMMAND" >&2' ERR

ROOT="${AUTOGRADER_ROOT:-/autograder}"
SOURCE="$ROOT/source"
VENV="$ROOT/venv"
TORCH_INDEX="${AUTOGRADER_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"

if [ "${AUTOGRADER_SETUP_APT:-1}" != 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends python3.11 python3.11-venv util-linux passwd
    # the sandbox, where the container lets it make namespaces (run_autograder tries it per submission)
    apt-get install -y --no-install-recommends bubblewrap \
        || echo "setup.sh: no bubblewrap: submissions will run as unprivileged ids"
fi

if ! PYTHON="$(command -v python3.11)"; then
    echo "setup.sh: no python3.11 on PATH: the lock (requirements.lock) is for CPython 3.11" >&2
    exit 1
fi
echo "setup.sh: grading with $PYTHON, Python $("$PYTHON" -c 'import sys; print(sys.version.split()[0])')"

"$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --no-cache-dir --disable-pip-version-check --require-hashes --only-binary=:all:)
# torch's CPU wheel from PyTorch's CPU index alone: PyPI's torch is the CUDA build
"${PIP[@]}" --no-deps --index-url "$TORCH_INDEX" -r "$SOURCE/torch.lock"
# every other package from PyPI, each wheel checked against the lock's hash (torch is there already)
"${PIP[@]}" -r "$SOURCE/requirements.lock"
"$VENV/bin/python" -m pip check --disable-pip-version-check

# where bubblewrap cannot run, each submission runs as numeric ids of its own (40000-49999, no
# passwd entry, none to create here: autograder/uids.py)

# the stubbed course_lib and the sandbox's copy of autograder, built once for every submission;
# this also fails the build here if the environment cannot grade
cd "$SOURCE/course"
PYTHONPATH="$SOURCE/course" "$VENV/bin/python" -m autograder.gradescope prepare --root "$ROOT"
