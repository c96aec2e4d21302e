"""Output files: checked before any work, written atomically, named from the file name only.

* :func:`check_output` refuses, with a one-line error naming the flag, a path whose folder does
  not exist, is not a folder or is not writable, a path that is itself a folder or ends in a
  slash, and a file name whose suffix is not one the output is read back by (``suffixes``: a
  hardware file is read as TOML unless it ends in ``.json``; a plot's format is its suffix,
  :data:`PLOT_SUFFIXES`);
* :func:`atomic_write` writes to a temporary file in the same folder and renames it over the
  target (``os.replace``) only once everything is written and flushed to disk: a full disk or an
  error half-way leaves the old file (or none), never half a CSV. A target that exists and is not
  a regular file (``/dev/stdout``, ``/dev/full``) is written in place, opened without blocking;
* :func:`sibling` derives a companion file's name (``out/sim.png`` -> ``out/sim-timeline.png``)
  from the file name alone, never from dots in the folders above it.

>>> sibling("/x/d.v2/plot.svg", "timeline").as_posix()
'/x/d.v2/plot-timeline.svg'
>>> sibling("/x/d.v2/plot", "timeline", default_suffix=".png").as_posix()
'/x/d.v2/plot-timeline.png'
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from .errors import CostModelError

__all__ = ["check_output", "atomic_write", "sibling", "PLOT_SUFFIXES"]

#: the file suffixes a figure is written as (matplotlib's ``savefig`` formats that need no extra
#: package; no suffix: PNG)
PLOT_SUFFIXES = (
    "",
    ".png",
    ".svg",
    ".svgz",
    ".pdf",
    ".eps",
    ".ps",
    ".pgf",
    ".jpg",
    ".jpeg",
    ".tif",
    ".tiff",
    ".webp",
)


def _show(p: Path | str) -> str:
    return repr(str(p)[:200])


def check_output(path: str | Path, flag: str, *, suffixes: Sequence[str] = ()) -> Path:
    """``path`` as a Path that can be written: its folder exists, is a folder and is writable,
    the path is not a folder, and its suffix (lower case) is one of ``suffixes`` when given (an
    existing device or pipe, such as ``/dev/stdout``, has none to check); a one-line error naming
    ``flag`` otherwise."""
    p = Path(path)
    if not str(path):
        raise CostModelError(f"{flag}: give a file path, got an empty one")
    if str(path).endswith(("/", os.sep)):  # Path() drops the slash: 'out.html/' would write 'out.html'
        raise CostModelError(f"{flag} {_show(path)} ends in a slash, which names a folder; give a file path")
    if suffixes and p.suffix.lower() not in suffixes and _regular_or_absent(p):
        shown = ", ".join(s for s in suffixes if s)  # "" (no suffix) is said in words, not as 'none'
        bare = ", or have no suffix" if "" in suffixes else ""
        raise CostModelError(f"{flag} {_show(p)}: the file name must end in one of {shown}{bare}")
    parent = p.parent if str(p.parent) else Path(".")
    try:
        if not parent.exists():
            raise CostModelError(f"{flag} {_show(p)}: folder {_show(parent)} does not exist")
        if not parent.is_dir():
            raise CostModelError(f"{flag} {_show(p)}: {_show(parent)} is not a folder")
        if p.is_dir():
            raise CostModelError(f"{flag} {_show(p)} is a folder; give a file path")
        if p.exists() and not os.access(p, os.W_OK):
            raise CostModelError(f"{flag} {_show(p)}: the file is not writable")
        if not (p.exists() and not p.is_file()) and not os.access(parent, os.W_OK | os.X_OK):
            raise CostModelError(f"{flag} {_show(p)}: folder {_show(parent)} is not writable")
        if p.is_fifo():  # written without blocking (atomic_write): a pipe needs its reader first
            _probe_reader(p, flag)
    except OSError as exc:
        raise CostModelError(f"{flag} {_show(p)} is not a usable path: {exc.strerror}") from None
    return p


def _probe_reader(p: Path, flag: str) -> None:
    """Refuse, before any work, a named pipe no process reads: :func:`atomic_write` opens a pipe
    without blocking, which fails then (``ENXIO``), after the work it was to write."""
    import errno

    try:
        fd = os.open(p, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise CostModelError(
                f"{flag} {_show(p)} is a named pipe no process reads: start its reader first"
            ) from None
        raise
    os.close(fd)


def _regular_or_absent(p: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(p).st_mode)
    except (OSError, ValueError):  # absent (a dangling link too), or not a usable name
        return True


@contextlib.contextmanager
def atomic_write(
    path: str | Path, flag: str = "output", *, binary: bool = False, suffixes: Sequence[str] = ()
) -> Iterator[IO[Any]]:
    """A file object whose contents replace ``path`` only when the block ends without an error
    (module doc; a link at ``path`` is replaced, never written through); ``OSError`` (a full
    disk, a vanished folder) becomes a one-line error naming ``flag``, and the temporary file is
    removed. ``suffixes``: as :func:`check_output`."""
    p = check_output(path, flag, suffixes=suffixes)
    mode = "wb" if binary else "w"
    enc = None if binary else "utf-8"
    try:
        if not _regular_or_absent(p):  # a device or a pipe: written in place, never replaced
            fd = os.open(p, os.O_WRONLY | os.O_NONBLOCK)
            os.set_blocking(fd, True)
            with open(fd, mode, encoding=enc, newline=None if binary else "") as f:
                yield f
            return
        parent = p.parent if str(p.parent) else Path(".")
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name[:100]}.", suffix=".tmp", dir=parent)
        try:
            with open(fd, mode, encoding=enc, newline=None if binary else "") as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o666 & ~_umask())
            os.replace(tmp, p)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        raise CostModelError(f"{flag} {_show(p)}: cannot write it ({exc.strerror or exc})") from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def sibling(path: str | Path, tag: str, *, default_suffix: str = "") -> Path:
    """``path``'s companion file ``STEM-TAG.SUFFIX`` in the same folder, from the file name only
    (module doc); ``default_suffix`` when the name has none."""
    p = Path(path)
    suffix = p.suffix or default_suffix
    return p.with_name(f"{p.stem if p.suffix else p.name}-{tag}{suffix}")
