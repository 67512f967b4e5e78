"""The CUDA files a check covers (folders walked, build outputs and hidden folders skipped with a word,
symlink loops named) and reading one (binary, UTF-16 and oversized files refused with the reason, other
non-UTF-8 text read as Latin-1 and said so)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

CUDA_SUFFIXES = (".cu", ".cuh")
_SKIP_DIRS = {".git", ".kernellsp", "node_modules", "build", "dist", ".venv", "venv", "__pycache__"}
MAX_FILE_BYTES = 8 * 1024 * 1024


class CheckError(Exception):
    """A usage problem (no such path, nothing to check); the CLI exits 2 with the message."""


def collect_files(paths: Iterable[str | Path], notes: list[str] | None = None) -> list[Path]:
    """Expand files and directories to CUDA files; a path that does not exist raises :class:`CheckError`.

    Whatever is skipped on the way (an unreadable folder, a symlink loop) is said in ``notes``, never
    silently dropped, and so is a file named explicitly that is not a .cu/.cuh file.
    """
    said = notes if notes is not None else []
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if not p.exists() and not p.is_symlink():
            raise CheckError(f"{raw}: no such file or directory")
        if p.is_dir():
            out.extend(_walk_cuda_files(p, said))
        else:
            if not str(p).endswith(CUDA_SUFFIXES):
                said.append(f"{raw}: skipped: not a CUDA file (kernellsp checks .cu and .cuh files)")
                continue
            out.append(p)
    seen: set[Path] = set()
    uniq = []
    for p in out:
        try:
            r = p.resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            # RuntimeError: Python 3.11 reports a symlink loop that way; OSError: ELOOP or a dangling link.
            said.append(f"{p}: skipped: {_link_problem(p, exc)}")
            continue
        if r not in seen:
            seen.add(r)
            uniq.append(p)
    return uniq


def _walk_cuda_files(top: Path, notes: list[str]) -> list[Path]:
    def unreadable(exc: OSError) -> None:
        notes.append(f"{exc.filename}: folder skipped: {exc.strerror or exc} (check its mode and owner)")

    out: list[Path] = []
    for root, dirs, files in os.walk(top, onerror=unreadable):
        for d in sorted(dirs):
            # Build outputs are not the project's sources (CMake puts its compiler-probe .cu files there), but a
            # folder of CUDA files is not skipped without a word: name it, and how to check it anyway.
            if d in ("build", "dist") and _has_cuda(Path(root) / d):
                notes.append(
                    f"{Path(root) / d}: folder skipped (build output); name it to check its CUDA files"
                )
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        out.extend(Path(root) / f for f in sorted(files) if f.endswith(CUDA_SUFFIXES))
    return out


def _has_cuda(top: Path) -> bool:
    """Does ``top`` hold a .cu/.cuh file anywhere below (stops at the first)?"""
    return any(any(f.endswith(CUDA_SUFFIXES) for f in files) for _root, _dirs, files in os.walk(top))


def _link_problem(path: Path, exc: BaseException) -> str:
    chain = [path.name]
    cur = path
    for _ in range(8):
        if not cur.is_symlink():
            break
        cur = cur.parent / os.readlink(cur)
        chain.append(cur.name)
        if cur.name in chain[:-1]:
            return "symlink loop (" + " -> ".join(chain) + ")"
    if isinstance(exc, FileNotFoundError):
        return f"broken symlink ({' -> '.join(chain)} does not exist)"
    return str(getattr(exc, "strerror", None) or exc)


def read_source(path: Path) -> tuple[str | None, str | None]:
    """The file's text, or ``(None, reason)`` for unreadable, binary or oversized files."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            return (
                None,
                f"file is {size // (1024 * 1024)} MiB; kernellsp checks files up to {MAX_FILE_BYTES // (1024 * 1024)} MiB",
            )
        data = path.read_bytes()
    except PermissionError:
        return None, "cannot read the file: permission denied (check its mode and owner)"
    except IsADirectoryError:
        return None, "is a directory"
    except OSError as exc:
        return None, f"cannot read the file: {exc.strerror or exc}"
    if data[:2] in (b"\xff\xfe", b"\xfe\xff") and b"\x00" in data[:64]:
        return None, "the file is UTF-16; nvcc and kernellsp read UTF-8 (save it as UTF-8)"
    if b"\x00" in data[:65536]:
        return None, "not a text file (it contains NUL bytes); is it a binary or an object file?"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return data.decode("latin-1"), None


def utf8_problem(data: bytes) -> tuple[int, str] | None:
    """``(0-based line, message)`` for bytes that are not UTF-8 (which :func:`read_source` reads as Latin-1)."""
    try:
        data.decode("utf-8")
        return None
    except UnicodeDecodeError as exc:
        start = exc.start
    line = data.count(b"\n", 0, start)
    col = start - (data.rfind(b"\n", 0, start) + 1)
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        what = f"it starts with 0x{data[0]:02x} 0x{data[1]:02x}, UTF-16's byte-order mark"
    else:
        what = f"byte 0x{data[start]:02x} at column {col + 1} is not UTF-8"
    return (
        line,
        f"the file is not valid UTF-8 ({what}); kernellsp read it as Latin-1, so columns and text may be off",
    )
