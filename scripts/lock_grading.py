"""Write requirements-grading.lock: the grading side's exact versions and wheel hashes.

    make lock                                         # = python scripts/lock_grading.py
    make lock TORCH_LINKS=DIR                         # torch's CPU wheel from a folder holding the same file

pip resolves requirements-cpu.txt less the test tools (`autograder.requirements_lock`) for the
grading image's Python and platform (CPython 3.11.0, Linux x86_64, manylinux up to glibc 2.35),
wheels only, from PyPI, with torch pinned to its CPU build (`torch==X.Y.Z+cpu`) found at
TORCH_LINKS (default: PyTorch's CPU index page of torch, whose files carry their sha256); no pip
configuration of this machine takes part. The lock keeps each package's version, the sha256 of
the wheel pip chose and what asks for it, worked out again here from the wheels' metadata.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from autograder.requirements_lock import (LOCK, REQUIREMENTS, ROOT_VIA, TARGET, TARGET_GLIBC, Entry,  # noqa: E402
                                          entry_text, grading_requirements, problems)

PYPI = "https://pypi.org/simple"
TORCH_LINKS = "https://download.pytorch.org/whl/cpu/torch/"
HEADER = """\
# The grading side's exact versions, each with its wheel's sha256: what the Gradescope zip's
# setup.sh installs with --require-hashes, on CPython 3.11 (3.11.0 and later) on Linux x86_64
# (manylinux up to glibc 2.35, Ubuntu 22.04's). Made from requirements-cpu.txt less the test tools;
# do not edit by hand. To make it again after changing requirements-cpu.txt:
#     make lock
# (python scripts/lock_grading.py; tests/test_requirements_lock.py says when the two drift apart)
"""


def platforms() -> list[str]:
    """pip's --platform values for the target: every manylinux tag up to TARGET_GLIBC."""
    major, minor = TARGET_GLIBC
    tags = [f"manylinux_{major}_{m}_x86_64" for m in range(minor, 4, -1)]
    return [*tags, "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]


def resolve(requirements: list[Requirement], torch_links: str) -> dict:
    """pip's installation report (`pip install --dry-run --report`) of `requirements` for the target."""
    torch = [r for r in requirements if canonicalize_name(r.name) == "torch"]
    pins = [s.version for r in torch for s in r.specifier if s.operator == "=="]
    if len(torch) != 1 or len(pins) != 1:
        raise SystemExit(f"{REQUIREMENTS.name}: torch must be pinned (torch==X.Y.Z): the lock takes its CPU wheel")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # no pip configuration of this machine (its mirrors, its find-links)
    with tempfile.TemporaryDirectory(prefix="course-lock-") as tmp:
        (Path(tmp) / "requirements.txt").write_text("".join(f"{r}\n" for r in requirements))
        (Path(tmp) / "constraints.txt").write_text(f"torch=={pins[0].split('+')[0]}+cpu\n")
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
               "--only-binary=:all:", "--python-version", TARGET["python_full_version"], "--implementation", "cp",
               "--abi", "cp" + TARGET["python_version"].replace(".", ""),
               *(f"--platform={p}" for p in platforms()), "--index-url", PYPI, "--find-links", torch_links,
               "-r", str(Path(tmp) / "requirements.txt"), "-c", str(Path(tmp) / "constraints.txt"),
               "--report", str(Path(tmp) / "report.json")]
        subprocess.run(cmd, env=env, check=True)
        return json.loads((Path(tmp) / "report.json").read_text())


def lock_of(report: dict, requirements: list[Requirement]) -> dict[str, Entry]:
    """The lock's entries: each package of `report`, its wheel's hash and what asks for it (its
    metadata's requirements whose markers hold on the target, with the extras asked of it)."""
    items = {canonicalize_name(i["metadata"]["name"]): i for i in report["install"]}
    via: dict[str, set[str]] = {name: set() for name in items}
    extras: dict[str, set[str]] = {name: set() for name in items}
    todo = []
    for r in requirements:
        name = canonicalize_name(r.name)
        via.setdefault(name, set()).add(ROOT_VIA)
        extras.setdefault(name, set()).update(r.extras)
        todo.append(name)
    environment = {**default_environment(), **TARGET}
    seen: set[tuple[str, frozenset]] = set()
    while todo:
        name = todo.pop()
        if (name, frozenset(extras[name])) in seen or name not in items:
            continue
        seen.add((name, frozenset(extras[name])))
        for text in items[name]["metadata"].get("requires_dist") or []:
            dep = Requirement(text)
            asked = [e for e in ["", *sorted(extras[name])]
                     if dep.marker is None or dep.marker.evaluate({**environment, "extra": e})]
            if not asked:
                continue
            child = canonicalize_name(dep.name)
            via.setdefault(child, set()).update(name + (f"[{e}]" if e else "") for e in asked)
            extras.setdefault(child, set()).update(dep.extras)
            todo.append(child)
    if set(via) != set(items):
        raise SystemExit(f"pip's choice and the requirements' closure differ: only pip's {sorted(set(items) - set(via))}, "
                         f"only the closure's {sorted(set(via) - set(items))}")
    lock = {}
    for name, item in sorted(items.items()):
        hashes = item["download_info"].get("archive_info", {}).get("hashes", {})
        if "sha256" not in hashes:
            raise SystemExit(f"{name}: pip's report gives no sha256 for {item['download_info']['url']}")
        lock[name] = Entry(item["metadata"]["version"], (f"sha256:{hashes['sha256']}",),
                           tuple(sorted(via[name], key=lambda v: (v != ROOT_VIA, v))))
    return lock


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch-links", default=TORCH_LINKS,
                        help="a page or folder that holds torch's CPU wheel (pip's --find-links)")
    parser.add_argument("--out", type=Path, default=LOCK)
    args = parser.parse_args(argv)
    requirements = grading_requirements()
    lock = lock_of(resolve(requirements, args.torch_links), requirements)
    found = problems(lock, requirements)
    if found:
        raise SystemExit("the lock made does not hold requirements-cpu.txt:\n  " + "\n  ".join(found))
    args.out.write_text(HEADER + "".join(entry_text(name, entry) for name, entry in lock.items()), encoding="utf-8")
    print(f"wrote {args.out} ({len(lock)} packages, torch=={lock['torch'].version})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
