"""The grading side's lock, `requirements-grading.lock`: what a Gradescope image installs, exactly.

The lock is made from `requirements-cpu.txt` less the test tools (`grading_requirements`) by
`make lock` (`scripts/lock_grading.py`) for the Python and platform of the grading image
(`TARGET`): one entry per package, in pip's hash-checking format, pip-compile's layout:

    accelerate==1.16.0 \\
        --hash=sha256:<the wheel's sha256>
        # via -r requirements-cpu.txt

Each `# via` line names what asks for the package: `-r requirements-cpu.txt` or another entry
(`name` or `name[extra]`). `problems(lock, requirements)` says where the two have drifted apart:
a requirement the lock lacks or pins outside its range, an entry nothing asks for, a hash missing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO_ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = REPO_ROOT / "requirements-cpu.txt"
LOCK = REPO_ROOT / "requirements-grading.lock"
TEST_TOOLS = ("pytest", "pytest-xdist", "hypothesis", "playwright")  # in requirements-cpu.txt, not for grading
ROOT_VIA = "-r requirements-cpu.txt"
# The grading image's Python and platform: Ubuntu 22.04's python3.11 is 3.11.0~rc1 (a package that
# asks for a later 3.11 would not install there) and its glibc 2.35.
TARGET = {"python_version": "3.11", "python_full_version": "3.11.0", "implementation_name": "cpython",
          "platform_python_implementation": "CPython", "os_name": "posix", "sys_platform": "linux",
          "platform_system": "Linux", "platform_machine": "x86_64"}
TARGET_GLIBC = (2, 35)


class Entry(NamedTuple):
    version: str
    hashes: tuple[str, ...]  # "sha256:<hex>"
    via: tuple[str, ...]  # ROOT_VIA, or the names (with [extra]) of the entries that ask for it


def grading_requirements(path: Path = REQUIREMENTS) -> list[Requirement]:
    """`path`'s requirements less TEST_TOOLS; a line that is not a requirement is an error naming it."""
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            requirement = Requirement(text)
        except ValueError as err:
            raise SystemExit(f"{path.name}:{number}: not a requirement ({err}): {line!r}") from None
        if canonicalize_name(requirement.name) not in TEST_TOOLS:
            out.append(requirement)
    return out


def read(path: Path = LOCK) -> dict[str, Entry]:
    """The lock's entries by canonical name; a line out of its format is an error naming it."""
    entries: dict[str, Entry] = {}
    name = None
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        pin = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\]+)\s*\\?", text)
        if pin:
            name = canonicalize_name(pin[1])
            if name in entries:
                raise SystemExit(f"{path.name}:{number}: {pin[1]} is pinned twice")
            entries[name] = Entry(pin[2], (), ())
        elif text.startswith("--hash=") and name:
            entries[name] = entries[name]._replace(hashes=(*entries[name].hashes, text[len("--hash="):].rstrip(" \\")))
        elif text.startswith("# via ") and name:
            entries[name] = entries[name]._replace(via=(*entries[name].via, text[len("# via "):]))
        elif text and not text.startswith("#"):
            raise SystemExit(f"{path.name}:{number}: not a pin (name==version), a --hash= or a comment: {line!r}")
    return entries


def problems(lock: dict[str, Entry], requirements: list[Requirement]) -> list[str]:
    """Where `lock` and `requirements` have drifted apart (empty when they agree)."""
    found = []
    roots = {canonicalize_name(r.name) for r in requirements}
    for requirement in requirements:
        name = canonicalize_name(requirement.name)
        if name not in lock:
            found.append(f"{requirement} is not in the lock")
        elif not requirement.specifier.contains(lock[name].version, prereleases=True):
            found.append(f"{requirement}: the lock has {name}=={lock[name].version}")
        elif ROOT_VIA not in lock[name].via:
            found.append(f"{name}: a requirement, but its entry does not say `# via {ROOT_VIA}`")
    for name, entry in lock.items():
        if not entry.hashes or not all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in entry.hashes):
            found.append(f"{name}=={entry.version}: no sha256 hash, or one out of form")
        if ROOT_VIA in entry.via and name not in roots:
            found.append(f"{name}: says `# via {ROOT_VIA}`, which does not ask for it")
        for asker in entry.via:
            if asker != ROOT_VIA and canonicalize_name(asker.split("[")[0]) not in lock:
                found.append(f"{name}: asked for by {asker}, which is not in the lock")
    reached, todo = set(), [n for n in roots if n in lock]
    asked_by = {name: {canonicalize_name(a.split("[")[0]) for a in e.via if a != ROOT_VIA} for name, e in lock.items()}
    while todo:
        current = todo.pop()
        if current not in reached:
            reached.add(current)
            todo += [name for name, askers in asked_by.items() if current in askers]
    found += [f"{name}=={lock[name].version}: nothing in requirements-cpu.txt asks for it, directly or not"
              for name in sorted(set(lock) - reached)]
    return found


def entry_text(name: str, entry: Entry) -> str:
    """One entry in the lock's layout (see the module docstring)."""
    lines = [f"{name}=={entry.version}" + (" \\" if entry.hashes else "")]
    lines += [f"    --hash={h}" + (" \\" if i < len(entry.hashes) - 1 else "") for i, h in enumerate(entry.hashes)]
    lines += [f"    # via {v}" for v in entry.via]
    return "\n".join(lines) + "\n"
