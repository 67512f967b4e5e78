"""The project's own compile flags for nvcc: include folders, defines, and what ``compile_commands.json`` says.

A project with its headers in ``include/`` builds only with ``-Iinclude``. kernellsp takes the flags from:

1. ``compile_commands.json`` (CMake writes it with ``CMAKE_EXPORT_COMPILE_COMMANDS=ON``; clangd users have
   one): the nearest one above the file, ``compile_commands.json`` or ``build/compile_commands.json`` in the
   file's folder or a parent (as clangd finds it), or the one the ``compile_commands`` setting names. The
   file's own entry gives its flags; a file without an entry (a header, a new file) takes those of the
   entry with the same stem, else of the entry nearest to it in the folder tree (clangd does the same);
2. the ``include_dirs``, ``defines`` and ``extra_flags`` settings (``kernellsp.toml`` ``[settings]``);
3. ``-I`` and ``-D`` on the command line.

Only flags that say how to *read* the code are kept from a compile command (``-I``, ``-isystem``, ``-D``,
``-U``, ``-include``, ``-std``, the ``--expt-*``/``--extended-lambda`` language switches, ``-rdc``, fast
math, ``-maxrregcount``, the host compiler); the target, output, debug and optimisation flags are
kernellsp's own (``-arch`` from the ``arch`` setting, ``-lineinfo``, ``-cubin``). The flags are part of
every build's cache key, so changing them rebuilds.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

#: Flags that take the next argument as their value (or join it with ``=``), kept with their value.
_KEEP_WITH_VALUE = {
    "-I": "-I",
    "--include-path": "-I",
    "-isystem": "-isystem",
    "--system-include": "-isystem",
    "-D": "-D",
    "--define-macro": "-D",
    "-U": "-U",
    "--undefine-macro": "-U",
    "-include": "-include",
    "--pre-include": "-include",
    "-std": "-std",
    "--std": "-std",
    "-ccbin": "-ccbin",
    "--compiler-bindir": "-ccbin",
    "-maxrregcount": "-maxrregcount",
    "--maxrregcount": "-maxrregcount",
}
#: Flags without a value that change how the code reads or compiles, kept as written.
_KEEP_BARE = {
    "--expt-relaxed-constexpr",
    "-expt-relaxed-constexpr",
    "--extended-lambda",
    "-extended-lambda",
    "--expt-extended-lambda",
    "-expt-extended-lambda",
    "--use_fast_math",
    "-use_fast_math",
    "-rdc=true",
    "--relocatable-device-code=true",
    "-dc",
}
#: Flags kernellsp sets itself; in ``extra_flags`` they are refused (in a compile command they are dropped).
OWN_FLAGS = (
    "-o",
    "--output-file",
    "-c",
    "--compile",
    "-arch",
    "--gpu-architecture",
    "-gencode",
    "--generate-code",
    "-code",
    "--gpu-code",
    "-cubin",
    "--cubin",
    "-ptx",
    "--ptx",
    "-E",
    "--preprocess",
    "-M",
    "-MM",
    "-MD",
    "-MF",
    "-lineinfo",
    "--generate-line-info",
    "-x",
    "--x",
)


class FlagsError(ValueError):
    """A flag setting kernellsp cannot use; the message names the setting and the flag."""


@dataclass(frozen=True)
class FileFlags:
    """The nvcc flags for one file, the folders its headers are found in, and where the flags came from."""

    args: tuple[str, ...]
    include_dirs: tuple[Path, ...]
    database: str | None = None


@dataclass(frozen=True)
class BuildFlags:
    """The project's flags (settings and command line) and how to find its ``compile_commands.json``.

    ``compile_commands``: ``None`` finds the nearest one, ``"none"`` reads none, else the file's path.
    """

    include_dirs: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()
    compile_commands: str | None = None

    @classmethod
    def from_settings(
        cls, settings: Any, root: Path | None, include_dirs: Sequence[str] = (), defines: Sequence[str] = ()
    ) -> BuildFlags:
        """The settings' flags (relative include folders and database path from ``root``) plus the command line's
        (relative to the working directory); raises :class:`FlagsError` for an ``extra_flags`` entry kernellsp sets
        itself."""
        base = root or Path.cwd()
        for f in settings.extra_flags:
            name = f.split("=", 1)[0]
            if name in OWN_FLAGS:
                raise FlagsError(
                    f"setting 'extra_flags': {f!r} is kernellsp's own (it builds one cubin per file for the "
                    "arch setting); remove it"
                )
        incs = [str((base / d).resolve()) for d in settings.include_dirs]
        incs += [str(Path(d).resolve()) for d in include_dirs]
        db = settings.compile_commands
        if db is not None and db.strip().lower() != "none":
            db = str((base / db).resolve())
        return cls(
            tuple(dict.fromkeys(incs)),
            (*settings.defines, *defines),
            tuple(settings.extra_flags),
            "none" if db is not None and db.strip().lower() == "none" else db,
        )

    def for_file(self, path: Path, root: Path | None = None) -> FileFlags:
        """The flags for ``path``: its compile command's, then the settings', then the command line's."""
        args: list[str] = []
        dirs: list[Path] = []
        database: str | None = None
        db = self._database(path, root)
        if db is not None:
            got = flags_from_database(db, path)
            if got is not None:
                args += got.args
                dirs += got.include_dirs
                database = str(db)
        for d in self.include_dirs:
            args += ["-I", d]
            dirs.append(Path(d))
        args += [f"-D{d}" for d in self.defines]
        args += list(self.extra)
        return FileFlags(tuple(args), tuple(dict.fromkeys(dirs)), database)

    def _database(self, path: Path, root: Path | None) -> Path | None:
        if self.compile_commands == "none":
            return None
        if self.compile_commands is not None:
            p = Path(self.compile_commands)
            return p if p.is_file() else None
        return find_database(path, root)


def find_database(path: Path, root: Path | None = None) -> Path | None:
    """The nearest ``compile_commands.json`` (or ``build/compile_commands.json``) in ``path``'s folder or above,
    no higher than ``root`` (when given) and at most 8 levels up."""
    start = path.resolve().parent
    stop = root.resolve() if root is not None else None
    for i, d in enumerate([start, *start.parents]):
        if i > 8:
            break
        for cand in (d / "compile_commands.json", d / "build" / "compile_commands.json"):
            if cand.is_file():
                return cand
        if stop is not None and d == stop:
            break
    return None


def flags_from_database(db: Path, path: Path) -> FileFlags | None:
    """The reading flags of ``path``'s entry in ``db`` (or of the nearest entry), or ``None`` when ``db`` has none."""
    try:
        st = db.stat()
    except OSError:
        return None
    entries = _load_database(str(db), st.st_mtime_ns, st.st_size)
    if not entries:
        return None
    target = path.resolve()
    best = _pick_entry(entries, target)
    if best is None:
        return None
    directory, argv = best[1], best[2]
    args, dirs = compile_command_flags(argv, Path(directory))
    return FileFlags(tuple(args), tuple(dirs), str(db))


@lru_cache(maxsize=8)
def _load_database(db: str, _mtime: int, _size: int) -> list[tuple[Path, str, list[str]]]:
    """``(file, directory, argv)`` per entry; an unreadable or malformed database has none."""
    try:
        data = json.loads(Path(db).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return []
    out: list[tuple[Path, str, list[str]]] = []
    for e in data if isinstance(data, list) else []:
        if not isinstance(e, dict) or not isinstance(e.get("file"), str):
            continue
        directory = str(e.get("directory") or Path(db).parent)
        if isinstance(e.get("arguments"), list):
            argv = [str(a) for a in e["arguments"]]
        elif isinstance(e.get("command"), str):
            try:
                argv = shlex.split(e["command"])
            except ValueError:
                continue
        else:
            continue
        f = Path(e["file"])
        out.append(((f if f.is_absolute() else Path(directory) / f).resolve(), directory, argv))
    return out


def _pick_entry(
    entries: list[tuple[Path, str, list[str]]], target: Path
) -> tuple[Path, str, list[str]] | None:
    for e in entries:
        if e[0] == target:
            return e

    def closeness(e: tuple[Path, str, list[str]]) -> tuple[int, int]:
        common = os.path.commonpath([str(e[0].parent), str(target.parent)])
        return (int(e[0].stem == target.stem and e[0].parent == target.parent), len(Path(common).parts))

    return max(entries, key=closeness, default=None)


#: nvcc's spellings of "read more options from this file" (CMake's Makefile generator writes the include
#: folders of a CUDA target to ``CMakeFiles/<target>.dir/includes_CUDA.rsp`` and passes ``--options-file``).
_OPTIONS_FILE = ("--options-file", "-optf")


def expand_response_files(args: Sequence[str], directory: Path, depth: int = 0) -> list[str]:
    """``args`` with every ``--options-file F`` / ``--options-file=F`` / ``-optf F`` / ``@F`` replaced by the
    options in ``F`` (relative to ``directory``; shell-style quoting, nested files up to 8 deep). A file that
    cannot be read is dropped, as the compile would fail on it anyway."""
    out: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        path: str | None = None
        if a in _OPTIONS_FILE and i < len(args):
            path, i = args[i], i + 1
        elif a.startswith("--options-file="):
            path = a.split("=", 1)[1]
        elif a.startswith("@") and len(a) > 1:
            path = a[1:]
        if path is None:
            out.append(a)
            continue
        if depth >= 8:
            continue
        p = Path(path) if os.path.isabs(path) else directory / path
        try:
            inner = shlex.split(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        out += expand_response_files(inner, directory, depth + 1)
    return out


def compile_command_flags(argv: Sequence[str], directory: Path) -> tuple[list[str], list[Path]]:
    """The reading flags of one compile command (relative paths resolved against ``directory``) and its include
    folders; everything else (compiler, output, target, optimisation) is dropped."""
    out: list[str] = []
    dirs: list[Path] = []
    argv = [*argv[:1], *expand_response_files(argv[1:], directory)]
    i = 1  # argv[0] is the compiler
    while i < len(argv):
        a = argv[i]
        i += 1
        if a in _KEEP_BARE:
            out.append("-rdc=true" if a == "-dc" else a)
            continue
        name, value = a, None
        if ("=" in a and a.startswith("--")) or a.startswith("-std=") or a.startswith("-maxrregcount="):
            name, value = a.split("=", 1)
        else:
            for short in ("-isystem", "-I", "-D", "-U"):
                if a.startswith(short) and a != short:
                    name, value = short, a[len(short) :]
                    break
        canon = _KEEP_WITH_VALUE.get(name)
        if canon is None:
            continue
        if value is None:
            if i >= len(argv):
                break
            value = argv[i]
            i += 1
        if canon in ("-I", "-isystem", "-include", "-ccbin") and not os.path.isabs(value):
            value = str((directory / value).resolve())
        if canon in ("-I", "-isystem"):
            dirs.append(Path(value))
            out += [canon, value]
        elif canon in ("-D", "-U"):
            out.append(f"{canon}{value}")
        elif canon in ("-std", "-maxrregcount"):
            out.append(f"{canon}={value}")
        else:
            out += [canon, value]
    return out, dirs
