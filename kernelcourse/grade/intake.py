"""A student's folder, read: the exercise's files found in it and copied into the scratch
folder of their grading (the submissions folder is only ever read, here).

What one student's folder can do to the run, and what it cannot (each phase below says
which it protects):
  * finding the files: a walk that never follows a link, bounded in depth and entries; the
    file at the top of the folder is graded (else the shallowest; several equally shallow
    ones are refused, listed), and the copies not graded are named in the report;
  * copying them: opened without following links, checked on the open descriptor (a
    regular file, one link, at most FILE_LIMIT bytes), so that neither a link nor a file
    swapped between the check and the copy brings another file's text into the grade.
"""
from __future__ import annotations

import errno
import io
import os
import stat
import tokenize
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from . import report

FILE_LIMIT = 1 << 20          # bytes: a submitted file larger than this is not graded
DEPTH_LIMIT = 8               # folders below a student's folder searched for the files
ENTRY_LIMIT = 10_000          # entries of one student's folder looked at, all depths together

# A student's folder is walked and read through file descriptors, each folder opened with
# O_NOFOLLOW from the one above it: no link is ever followed, and a folder or a file
# swapped for a link after it was looked at is refused when it is opened, not followed.
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC      # NONBLOCK: a FIFO never hangs


def _open_folder(root: Path, parts: tuple) -> int:
    """A descriptor of root/parts..., none of `parts` a link (root is the instructor's path)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in parts:
            inner = os.open(name, _FOLDER, dir_fd=fd)
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def shown_path(parts: tuple) -> str:
    return "/".join(report.visible(p) for p in parts)


@dataclass
class Found:
    """A student's folder as walk() saw it: for each name looked for, where it is (paths as
    tuples of names inside the folder, any kind of entry), and what was not looked at."""

    paths: dict
    notes: list = field(default_factory=list)


def walk(folder: Path, names) -> Found:
    """Breadth first through `folder`, never through a link, at most DEPTH_LIMIT folders
    deep and ENTRY_LIMIT entries in all (an endless nesting or a million files cost the
    walk nothing); the entries named as in `names`."""
    found = Found({name: [] for name in names})
    links, deeper, seen = [], None, 0
    todo = deque([()])
    while todo:
        parts = todo.popleft()
        try:
            fd = _open_folder(folder.parent, (folder.name, *parts))
        except OSError as exc:
            found.notes.append(f"{shown_path(parts) or 'the folder'} could not be read ({exc.strerror})")
            continue
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    seen += 1
                    if seen > ENTRY_LIMIT:
                        found.notes.append(f"the folder holds more than {ENTRY_LIMIT} entries: the search "
                                           "for the files stopped there")
                        return found
                    path = (*parts, entry.name)
                    if entry.name in found.paths:
                        found.paths[entry.name].append(path)      # whatever it is: judged when chosen
                    elif entry.is_symlink():
                        links.append(path)
                    elif entry.is_dir(follow_symlinks=False):
                        if len(path) <= DEPTH_LIMIT:
                            todo.append(path)
                        else:
                            deeper = deeper or path
        finally:
            os.close(fd)
    if links:
        found.notes.append(f"symbolic links are not followed: {', '.join(map(shown_path, links[:5]))}"
                           + (f" and {len(links) - 5} more" if len(links) > 5 else ""))
    if deeper:
        found.notes.append(f"folders nested deeper than {DEPTH_LIMIT} levels were not searched "
                           f"({shown_path(deeper)}/...)")
    return found


class FileRefused(Exception):
    """Why a file found in a student's folder is not graded."""


def read_file(folder: Path, parts: tuple) -> bytes:
    """The bytes of folder/parts..., a regular file with one link and at most FILE_LIMIT
    bytes, as its open descriptor says (never the path, which could change meanwhile)."""
    shown = shown_path(parts)
    try:
        at = _open_folder(folder.parent, (folder.name, *parts[:-1]))
    except OSError as exc:
        raise FileRefused(f"{shown}: a folder on its way could not be opened ({exc.strerror}; "
                          "links are not followed)") from None
    try:
        before = os.stat(parts[-1], dir_fd=at, follow_symlinks=False)
        if stat.S_ISLNK(before.st_mode):
            raise FileRefused(f"{shown} is a symbolic link: links are not graded (upload the file itself)")
        if not stat.S_ISREG(before.st_mode):
            raise FileRefused(f"{shown} is not a regular file")
        fd = os.open(parts[-1], _FILE, dir_fd=at)
    except OSError as exc:
        raise FileRefused(f"{shown} became a symbolic link while it was being read: links are not graded"
                          if exc.errno == errno.ELOOP else f"{shown} could not be opened ({exc.strerror})") from None
    finally:
        os.close(at)
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (before.st_dev, before.st_ino) or not stat.S_ISREG(opened.st_mode):
            raise FileRefused(f"{shown} changed while it was being read")
        if opened.st_nlink > 1:
            raise FileRefused(f"{shown} has {opened.st_nlink} hard links: a hard link can be another file "
                          "(not the student's own), so it is not graded (upload a copy)")
        data = b""
        while len(data) <= FILE_LIMIT and (chunk := os.read(fd, FILE_LIMIT + 1 - len(data))):
            data += chunk
        if len(data) > FILE_LIMIT:
            raise FileRefused(f"{shown} is larger than {FILE_LIMIT >> 20} MB: not graded")
        return data
    finally:
        os.close(fd)


def python_decoding(data: bytes, name: str) -> str | None:
    """Why Python cannot read `data` as the source of `name`, in a line a student can act on
    (Python reads UTF-8 unless a coding line says otherwise); None when it can."""
    try:
        encoding = tokenize.detect_encoding(io.BytesIO(data).readline)[0]
    except SyntaxError:              # line 1 or 2 not UTF-8, or a coding line naming no codec
        encoding = "utf-8"
    try:
        data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        where = f"byte 0x{data[exc.start]:02x} at line {line}"
        if encoding in ("utf-8", "utf-8-sig"):
            return f"{name} is not UTF-8 ({where}): save it as UTF-8"
        return f"{name} is not {encoding}, as its coding line says ({where})"
    return None


@dataclass
class Copied:
    """What copy_files() made of a student's folder: the files copied, the files refused
    (file -> why), and the notes on the submission as a whole, in the order they arose."""

    present: set = field(default_factory=set)
    refused: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)

    def refuse(self, name: str, why: str) -> None:
        self.refused[name] = why
        self.notes.append(why)


def copy_files(folder: Path, names, target: Path) -> Copied:
    """Each of `names` from `folder` into `target` (made here): the one at the top of the
    folder, else the shallowest (Gradescope may nest them); the copies not graded named
    in the notes, several equally shallow ones refused; links, oversized files and a
    Python file that Python cannot read refused, saying why."""
    target.mkdir()
    found = walk(folder, names)
    copied = Copied(notes=list(found.notes))
    for name, paths in found.paths.items():
        if not paths:
            continue
        paths = sorted(paths, key=lambda p: (len(p), p))
        shallowest = [p for p in paths if len(p) == len(paths[0])]
        if len(shallowest) > 1:
            copied.refuse(name, f"{name} is in {len(shallowest)} folders, none above the others: "
                                f"{', '.join(map(shown_path, shallowest))} (keep one, or put the one to "
                                "grade at the top of the submission)")
            continue
        if len(paths) > 1:
            copied.notes.append(f"{name}: graded {shown_path(paths[0])}; also found, not graded: "
                                f"{', '.join(map(shown_path, paths[1:]))}")
        try:
            data = read_file(folder, paths[0])
        except FileRefused as exc:
            copied.refuse(name, str(exc))
            continue
        if name.endswith(".py") and (why := python_decoding(data, name)):
            copied.refuse(name, why)
            continue
        (target / name).write_bytes(data)        # the student's bytes, exactly
        copied.present.add(name)
    for path in [target, *target.iterdir()]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return copied
