"""requirements-grading.lock against requirements-cpu.txt: when they drift apart, these fail.

`make lock` makes the lock again (`scripts/lock_grading.py`); `make gradescope` refuses a lock
that has drifted (`autograder.gradescope.locked_requirements`).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from autograder import requirements_lock
from autograder.requirements_lock import TARGET, entry_text, grading_requirements, problems, read


def test_the_lock_holds_every_grading_requirement_and_nothing_more():
    lock = read()
    requirements = grading_requirements()
    assert problems(lock, requirements) == []
    names = {canonicalize_name(r.name) for r in requirements}
    assert {"torch", "nbgrader", "transformers", "ipykernel"} <= names and not names & {"pytest", "playwright"}
    assert lock["torch"].version.endswith("+cpu")
    print(f"{len(lock)} packages locked for {len(requirements)} requirements")


def test_the_drift_check_names_each_kind_of_drift(tmp_path):
    """A requirement added, one moved out of the lock's pin, one dropped (its package and what only
    it asked for left over), a hash lost: each is named."""
    lock = read()
    requirements = [r for r in grading_requirements() if canonicalize_name(r.name) != "nbgrader"]
    requirements = [Requirement("torch==2.99.0") if canonicalize_name(r.name) == "torch" else r for r in requirements]
    requirements.append(Requirement("scipy>=1.0"))
    lock["numpy"] = lock["numpy"]._replace(hashes=())
    found = problems(lock, requirements)
    assert "scipy>=1.0 is not in the lock" in found, found
    assert f"torch==2.99.0: the lock has torch=={lock['torch'].version}" in found, found
    assert "nbgrader: says `# via -r requirements-cpu.txt`, which does not ask for it" in found, found
    assert f"alembic=={lock['alembic'].version}: nothing in requirements-cpu.txt asks for it, directly or not" in found
    assert f"numpy=={lock['numpy'].version}: no sha256 hash, or one out of form" in found, found
    # and the lock read back as written
    (tmp_path / "lock").write_text("# a comment\n" + "".join(entry_text(n, e) for n, e in lock.items()))
    assert read(tmp_path / "lock") == lock


def test_a_lock_line_out_of_format_is_named(tmp_path):
    (tmp_path / "bad.lock").write_text("torch==2.13.0+cpu \\\n    --hash=sha256:" + "0" * 64 + "\nnumpy>=2\n")
    with pytest.raises(SystemExit, match=r"bad.lock:3: not a pin \(name==version\), a --hash= or a comment: 'numpy>=2'"):
        read(tmp_path / "bad.lock")


def installed(name: str, version: str):
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return None
    return dist if dist.version == version else None


def test_each_locked_package_asks_only_for_locked_packages():
    """Read from the installed packages' own metadata (where this environment has the lock's version):
    every requirement of a locked package that holds on the grading image's Python is in the lock
    at a version it accepts, and its entry names the asker: what `# via` says is what the wheels say."""
    lock = read()
    environment = {**default_environment(), **TARGET}
    extras = {name: {a.split("[")[1].rstrip("]") for e in lock.values() for a in e.via if a.startswith(f"{name}[")}
              for name in lock}
    for r in grading_requirements():
        extras[canonicalize_name(r.name)] |= set(r.extras)
    checked, missing = 0, []
    for name, entry in lock.items():
        dist = installed(name, entry.version)
        if dist is None:
            continue
        checked += 1
        for text in dist.requires or []:
            dep = Requirement(text)
            if not any(dep.marker is None or dep.marker.evaluate({**environment, "extra": e}) for e in
                       ["", *extras[name]]):
                continue
            child = canonicalize_name(dep.name)
            if child not in lock:
                missing.append(f"{name} asks for {dep}: not in the lock")
            elif not dep.specifier.contains(lock[child].version, prereleases=True):
                missing.append(f"{name} asks for {dep}: the lock has {lock[child].version}")
            elif not any(canonicalize_name(a.split("[")[0]) == name for a in lock[child].via):
                missing.append(f"{child}: its entry does not name {name}, which asks for it")
    assert missing == []
    assert checked >= 1
    print(f"{checked} of {len(lock)} locked packages checked against their installed metadata")


def test_the_lock_names_the_torch_wheel_of_this_machine_where_there_is_one():
    """The lock's torch hash is that of the CPU wheel in pip's find-links folders (PIP_FIND_LINKS),
    where this machine keeps one: the same file as PyTorch's CPU index."""
    torch = read()["torch"]
    wheels = [w for folder in os.environ.get("PIP_FIND_LINKS", "").split() if Path(folder).is_dir()
              for w in Path(folder).glob(f"torch-{torch.version}-cp311-cp311-*.whl")]
    if not wheels:
        pytest.skip(f"no torch-{torch.version} wheel in PIP_FIND_LINKS")
    assert {"sha256:" + hashlib.sha256(w.read_bytes()).hexdigest() for w in wheels} & set(torch.hashes)


def test_the_lock_says_how_to_make_it_again():
    head = requirements_lock.LOCK.read_text().split("\n\n")[0].splitlines()[:8]
    assert any(line.strip() == "#     make lock" for line in head), head
