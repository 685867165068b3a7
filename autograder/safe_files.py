"""Copying and reading files that a submission made, without ever following its links.

A submission folder (collected with tar, zip, git, `cp -a` or rsync, all of which keep links) and
the work folder a sandboxed run wrote can hold symbolic links (to the hidden cases, to a
classmate's submission, to the gradebook), named pipes (a reader blocks forever), devices, or
files of any size, sparse ones included. Everything here walks folders through file descriptors
with O_NOFOLLOW, so that no component of a path is ever resolved through a link: only regular
files and real folders are taken, the rest is dropped and counted; files are read through the
descriptor opened here (O_NONBLOCK, so a pipe swapped in cannot block), with a byte budget over
the whole copy (a file's apparent size counts, so a sparse file cannot slip through).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
CHUNK = 1 << 20


@dataclass
class CopyReport:
    files: int = 0
    bytes: int = 0
    links: list[str] = field(default_factory=list)  # dropped: symbolic links
    special: list[str] = field(default_factory=list)  # dropped: pipes, sockets, devices
    too_large: list[str] = field(default_factory=list)  # dropped: beyond the byte budget

    def notes(self, what: str) -> list[str]:
        out = []
        if self.links:
            out.append(f"{what}: {len(self.links)} symbolic link(s) not followed and left out ({', '.join(self.links[:3])})")
        if self.special:
            out.append(f"{what}: {len(self.special)} special file(s) left out ({', '.join(self.special[:3])})")
        if self.too_large:
            out.append(f"{what}: {len(self.too_large)} file(s) left out beyond the size limit ({', '.join(self.too_large[:3])})")
        return out


def copy_tree(src: Path, dst: Path, *, max_bytes: int, skip=lambda name: False, max_files: int = 10_000) -> CopyReport:
    """Copy the regular files and folders below `src` into `dst` (created), never following a
    link; `skip(name)` leaves out entries by name. `src` itself must be a real folder."""
    report = CopyReport()
    fd = os.open(str(src), DIR_FLAGS)
    try:
        _copy_dir(fd, Path(dst), "", report, max_bytes, skip, max_files)
    finally:
        os.close(fd)
    return report


def _copy_dir(fd: int, dst: Path, rel: str, report: CopyReport, max_bytes: int, skip, max_files: int) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    with os.scandir(fd) as entries:
        names = sorted((e.name, e) for e in entries)
    for name, entry in names:
        where = f"{rel}{name}"
        if skip(name):
            continue
        if entry.is_symlink():
            report.links.append(where)
        elif entry.is_dir(follow_symlinks=False):
            try:
                sub = os.open(name, DIR_FLAGS, dir_fd=fd)
            except OSError:
                report.special.append(where)
                continue
            try:
                _copy_dir(sub, dst / name, f"{where}/", report, max_bytes, skip, max_files)
            finally:
                os.close(sub)
        elif entry.is_file(follow_symlinks=False) and report.files < max_files:
            data = _read_at(fd, name, max_bytes - report.bytes)
            if data is None:
                report.too_large.append(where)
                continue
            (dst / name).write_bytes(data)
            report.files += 1
            report.bytes += len(data)
        else:
            report.special.append(where)


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
