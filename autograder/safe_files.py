"""Copying and reading files that a submission made, without ever following its links.

A submission folder (collected with tar, zip, git, `cp -a` or rsync, all of which keep links) and
the work folder a sandboxed run wrote can hold symbolic links (to the hidden cases, to a
classmate's submission, to the gradebook), named pipes (a reader blocks forever), devices, or
files of any size, sparse ones included. Everything here walks folders through file descriptors
with O_NOFOLLOW, so that no component of a path is ever resolved through a link: only regular
files and real folders are taken, the rest is dropped and counted; files are read through the
descriptor opened here (O_NONBLOCK, so a pipe swapped in cannot block), with a byte budget over
the whole copy (a file's apparent size counts, so a sparse file cannot slip through). The walk
keeps its own stack (no recursion) and stops at MAX_DEPTH folders down; names that are not UTF-8
are reported with their bytes escaped (`shown`), so a note is always valid text.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
CHUNK = 1 << 20
MAX_DEPTH = 64  # folders below the top that a copy enters; deeper ones are left out and noted


@dataclass
class CopyReport:
    files: int = 0
    bytes: int = 0
    links: list[str] = field(default_factory=list)  # dropped: symbolic links
    special: list[str] = field(default_factory=list)  # dropped: pipes, sockets, devices
    too_large: list[str] = field(default_factory=list)  # dropped: beyond the byte budget
    too_deep: list[str] = field(default_factory=list)  # dropped: folders beyond MAX_DEPTH

    def notes(self, what: str) -> list[str]:
        out = []
        if self.links:
            out.append(f"{what}: {len(self.links)} symbolic link(s) not followed and left out ({', '.join(self.links[:3])})")
        if self.special:
            out.append(f"{what}: {len(self.special)} special file(s) left out ({', '.join(self.special[:3])})")
        if self.too_large:
            out.append(f"{what}: {len(self.too_large)} file(s) left out beyond the size limit ({', '.join(self.too_large[:3])})")
        if self.too_deep:
            out.append(f"{what}: {len(self.too_deep)} folder(s) left out, more than {MAX_DEPTH} folders deep "
                       f"({', '.join(n[:80] + '...' for n in self.too_deep[:1])})")
        return out


def shown(name: str) -> str:
    """A file name as text that is always valid UTF-8: bytes that were not are escaped (\\xNN)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def copy_tree(src: Path, dst: Path, *, max_bytes: int, skip=lambda name: False, max_files: int = 10_000) -> CopyReport:
    """Copy the regular files and folders below `src` into `dst` (created), never following a
    link, at most MAX_DEPTH folders down, in name order; `skip(name)` leaves out entries by name.
    `src` itself must be a real folder. Names in the report are `shown` (valid text)."""
    report = CopyReport()
    stack = [_opened(os.open(str(src), DIR_FLAGS), Path(dst), "")]  # the folders being copied, outermost first
    try:
        while stack:
            fd, to, rel, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                os.close(stack.pop()[0])
                continue
            name = entry.name
            where = shown(f"{rel}{name}")
            if skip(name):
                continue
            if entry.is_symlink():
                report.links.append(where)
            elif entry.is_dir(follow_symlinks=False):
                if len(stack) > MAX_DEPTH:
                    report.too_deep.append(where)
                    continue
                try:
                    sub = os.open(name, DIR_FLAGS, dir_fd=fd)
                except OSError:
                    report.special.append(where)
                    continue
                stack.append(_opened(sub, to / name, f"{rel}{name}/"))
            elif entry.is_file(follow_symlinks=False) and report.files < max_files:
                data = _read_at(fd, name, max_bytes - report.bytes)
                if data is None:
                    report.too_large.append(where)
                    continue
                (to / name).write_bytes(data)
                report.files += 1
                report.bytes += len(data)
            else:
                report.special.append(where)
    finally:
        for fd, *_ in stack:
            os.close(fd)
    return report


def _opened(fd: int, dst: Path, rel: str) -> tuple:
    """A folder to copy: its descriptor, its copy (made here), its name, its entries in name order."""
    try:
        dst.mkdir(parents=True, exist_ok=True)
        with os.scandir(fd) as entries:
            listed = sorted(entries, key=lambda e: e.name)
    except BaseException:
        os.close(fd)
        raise
    return fd, dst, rel, iter(listed)


def _read_at(dir_fd: int | None, name: str, budget: int) -> bytes | None:
    """The bytes of a regular file (None when it is not one, or larger than `budget`)."""
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > budget:
            return None
        chunks, total = [], 0
        while total <= budget:
            chunk = os.read(fd, min(CHUNK, budget - total + 1))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks) if total <= budget else None
    finally:
        os.close(fd)


def read_file(path: Path, max_bytes: int) -> bytes | None:
    """A regular file's bytes, read through descriptors opened with O_NOFOLLOW (neither the file
    nor its folder may be a link: callers pass files of folders they made); None when it is
    missing, not a regular file or larger than `max_bytes`."""
    path = Path(path)
    try:
        fd = os.open(str(path.parent), DIR_FLAGS)
    except OSError:
        return None
    try:
        return _read_at(fd, path.name, max_bytes)
    finally:
        os.close(fd)


def remove_tree(path: Path) -> None:
    """Remove a folder a submission wrote into, however deep it made it (`rm -rf`, which walks
    without recursion and never follows a link; Python's rmtree stops at about 1,000 levels)."""
    import subprocess

    if os.path.lexists(path):
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
