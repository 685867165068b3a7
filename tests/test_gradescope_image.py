"""The Gradescope zip of 07 builds from zero on Ubuntu 22.04 and grades there.

`scripts/gradescope_image_check.py` makes a fresh Ubuntu 22.04 root with debootstrap, runs the
zip's own setup.sh in it as Gradescope builds an image, and grades the solution and the release
notebook there. It takes about an hour on 2 cores at load average 20 to 27 (setup.sh 38 minutes
of it) and about 3 GB of disk, so it runs only when asked (and is marked slow):

    COURSE_IMAGE_CHECK=1 .venv/bin/python -m pytest -p no:xdist tests/test_gradescope_image.py -s

(as root, with debootstrap installed, Ubuntu's archive and PyPI reachable, and torch's CPU wheel
of the lock in a folder of PIP_FIND_LINKS or COURSE_TORCH_WHEELS).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_zip_builds_from_zero_on_ubuntu_2204_and_grades_there(tmp_path):
    if os.environ.get("COURSE_IMAGE_CHECK") != "1":
        pytest.skip("minutes and gigabytes: set COURSE_IMAGE_CHECK=1 to run it")
    if os.geteuid() != 0 or not shutil.which("debootstrap"):
        pytest.skip("needs root and debootstrap")
    cmd = [sys.executable, str(ROOT / "scripts" / "gradescope_image_check.py"), "--assignment", "07",
           "--json", str(tmp_path / "report.json")]
    if os.environ.get("COURSE_TORCH_WHEELS"):
        cmd += ["--wheels", os.environ["COURSE_TORCH_WHEELS"]]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=4800)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-5000:])
    report = json.loads((tmp_path / "report.json").read_text())
    print(json.dumps(report, indent=1))
    assert report["python"].startswith("setup.sh: grading with /usr/bin/python3.11, Python 3.11.0"), report["python"]
    assert report["solution"]["score"] == report["solution"]["max_score"] == 15, report["solution"]
    assert report["release"]["score"] == 0 and report["release"]["max_score"] == 15, report["release"]
    for run in ("solution", "release"):
        assert report[run]["submission_status"] == "passed", report[run]
    assert 0 < report["venv_gib"] < report["image_gib"]
