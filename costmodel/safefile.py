"""Reading the files a user names, safely: regular files only, bounded reads, JSON objects
whose keys are unique.

A path may name a FIFO (an open would block), a link to ``/dev/zero`` (a read would never
end) or a file far larger than any configuration: :func:`read_regular_file` opens without
blocking, checks with ``fstat`` that what it opened is a regular file and reads at most a
stated number of bytes. ``json`` keeps the last of two equal keys silently, where TOML refuses
them: :func:`unique_keys` makes a ``json.loads`` hook that refuses them too.

A large text file (a trace, a result CSV) is read a line at a time rather than whole: opened with
:func:`open_user_file` (its size checked before a byte is read), its bytes counted as they are
read (:func:`bounded_text`, for a file that grows while read) and its lines bounded
(:func:`bounded_lines`, so one endless line is never held whole).
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Callable, Iterator
from typing import IO, Any, BinaryIO

from .errors import CostModelError

__all__ = [
    "BoundedRead",
    "bounded_lines",
    "bounded_text",
    "open_regular_file",
    "open_user_file",
    "read_regular_file",
    "read_user_file",
    "unique_keys",
]


def read_regular_file(
    path: str | os.PathLike[str], max_bytes: int, *, follow_links: bool = False
) -> bytes | None:
    """The bytes of ``path`` when it is a regular file of at most ``max_bytes``, else None.

    Opened with ``O_NOFOLLOW`` (a symbolic link at ``path`` is refused, unless
    ``follow_links``: a file the user named may be a link) and ``O_NONBLOCK`` (a FIFO never
    blocks the open), checked with ``fstat`` to be a regular file (not a FIFO, a device or a
    directory, wherever a link pointed), and read to at most ``max_bytes + 1`` bytes (a file
    that grows while read is refused too). None also when it cannot be opened or read.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    flags |= 0 if follow_links else getattr(os, "O_NOFOLLOW", 0)
    flags |= getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except (OSError, ValueError):  # missing, a link, no permission, a NUL in the name
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
            return None
        chunks, n = [], 0
        want = min(max_bytes, st.st_size) + 1  # the whole file and one byte more, in one read
        while n <= max_bytes:
            chunk = os.read(fd, want)
            if not chunk:
                break
            chunks.append(chunk)
            n += len(chunk)
            if len(chunk) < want:
                break  # a short read of a regular file: its end
            want = max_bytes + 1 - n  # it grew: read on to the limit
        return None if n > max_bytes else b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def open_regular_file(path: str | os.PathLike[str], max_bytes: int) -> tuple[BinaryIO, int] | None:
    """``path`` opened for reading, with its size, when it is a regular file of at most
    ``max_bytes`` (not a link, never blocking: as :func:`read_regular_file`), else None; for a
    file read in parts (:mod:`costmodel.formstore`). The caller closes it."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    flags |= getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except (OSError, ValueError):
        return None
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
        os.close(fd)
        return None
    return os.fdopen(fd, "rb"), st.st_size


def read_user_file(
    path: str | os.PathLike[str], *, what: str, max_bytes: int, error: type[Exception] = CostModelError
) -> bytes:
    """The bytes of the file a user named (links followed), or ``error`` saying why not: it does
    not exist, is not a regular file (a directory, FIFO or device), is larger than ``max_bytes``,
    or cannot be read."""
    name = str(path)[:200]
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise error(f"{what} {name!r} does not exist") from None
    except (OSError, ValueError) as exc:
        raise error(f"{what} {name!r} cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{what} {name!r} is not a regular file (a directory, FIFO or device)")
    if st.st_size > max_bytes:  # refused before a byte is read
        raise error(f"{what} {name!r} is {_size(st.st_size)}, larger than the {_size(max_bytes)} allowed")
    data = read_regular_file(path, max_bytes, follow_links=True)
    if data is None:
        raise error(f"{what} {name!r} cannot be read (changed while read, or larger than {max_bytes} bytes)")
    return data


def open_user_file(
    path: str | os.PathLike[str], *, what: str, max_bytes: int, error: type[Exception] = CostModelError
) -> BinaryIO:
    """The file a user named (links followed) opened for reading in parts, or ``error`` saying why
    not, as :func:`read_user_file` says it; for a file read as a stream (a trace). Opened
    non-blocking and checked with ``fstat`` on the descriptor read, so a FIFO or a device is
    refused, never waited on, even when it replaced the file after a check by name. The caller
    closes it and bounds what it reads beyond the size checked here (a file may grow)."""
    name = str(path)[:200]
    flags = (
        os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    )
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise error(f"{what} {name!r} does not exist") from None
    except (OSError, ValueError) as exc:
        raise error(f"{what} {name!r} cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{what} {name!r} is not a regular file (a directory, FIFO or device)")
        if st.st_size > max_bytes:  # refused before a byte is read
            raise error(f"{what} {name!r} is {_size(st.st_size)}, larger than the {_size(max_bytes)} allowed")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class BoundedRead(io.RawIOBase):
    """The bytes of ``f``, ``error(message)`` raised once more than ``limit`` have been read: a
    file's size is checked when it is opened (:func:`open_user_file`), and this bounds one that
    grows while it is read. Closing it leaves ``f`` open (its opener closes it)."""

    def __init__(
        self, f: BinaryIO, limit: int, message: str, error: type[Exception] = CostModelError
    ) -> None:
        super().__init__()
        self._f, self._left, self._message, self._error = f, limit, message, error

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = self._f.readinto(b)  # type: ignore[attr-defined]
        if n:
            self._left -= n
            if self._left < 0:
                raise self._error(self._message)
        return n or 0


def bounded_text(
    f: BinaryIO,
    limit: int,
    message: str,
    *,
    errors: str = "strict",
    error: type[Exception] = CostModelError,
) -> io.TextIOWrapper:
    """``f`` (a binary file, :func:`open_user_file`'s) read as UTF-8 text through a
    :class:`BoundedRead` of ``limit`` bytes; a byte-order mark (a spreadsheet's UTF-8 export) is
    dropped and line ends are kept as written (``newline=""``, as :mod:`csv` wants them).

    Parameters
    ----------
    f : BinaryIO
        The opened file; the caller closes it.
    limit : int
        The most bytes read.
    message : str
        The error's text when the file holds more than ``limit`` bytes.
    errors : str
        How undecodable bytes are handled (``strict``: ``UnicodeDecodeError``; ``replace``).
    error : type
        The exception raised past ``limit``.

    Returns
    -------
    io.TextIOWrapper
        The text, read in buffered parts.
    """
    buffered = io.BufferedReader(BoundedRead(f, limit, message, error))
    return io.TextIOWrapper(buffered, encoding="utf-8-sig", errors=errors, newline="")


def bounded_lines(
    f: IO[str], max_chars: int, where: str, error: type[Exception] = CostModelError
) -> Iterator[str]:
    """The lines of ``f``, one at a time, each at most ``max_chars`` characters: a longer one is
    refused as soon as ``max_chars + 1`` of its characters are read, never held whole.

    Parameters
    ----------
    f : IO[str]
        A text file.
    max_chars : int
        The longest line accepted, its line end included (characters).
    where : str
        What is read, in words, starting the error's text.
    error : type
        The exception raised for a longer line.

    Returns
    -------
    Iterator[str]
        The lines, line ends kept.
    """
    number = 0
    while True:
        line = f.readline(max_chars + 1)
        if not line:
            return
        number += 1
        if len(line) > max_chars:
            raise error(
                f"{where}: line {number:,} is longer than {max_chars:,} characters (its line end included)"
            )
        yield line


def _size(n: int) -> str:
    """``n`` bytes in words: ``67,108,864 bytes (64.0 MiB)``."""
    return f"{n:,} bytes ({n / 2**20:.1f} MiB)"


def unique_keys(error: type[Exception] = CostModelError) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    """A ``json.loads(..., object_pairs_hook=...)`` hook that raises ``error`` naming a key given
    twice in one object.

    >>> import json
    >>> json.loads('{"a": 1, "a": 2}', object_pairs_hook=unique_keys())
    Traceback (most recent call last):
    ...
    costmodel.errors.CostModelError: key 'a' appears twice in one object
    """

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in pairs:
            if k in out:
                raise error(f"key {k[:100]!r} appears twice in one object")
            out[k] = v
        return out

    return hook
