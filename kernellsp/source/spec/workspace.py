"""Workspace specs: ``[kernels.NAME]`` tables of ``kernellsp.toml`` or ``[tool.kernellsp.kernels.NAME]`` of
``pyproject.toml``, with their lines, and the checks that a table names a kernel of the workspace."""

from __future__ import annotations

import re
import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any

from kernellsp.source.model import CommentBlock, SourceModel
from kernellsp.source.spec.check import validate_against
from kernellsp.source.spec.models import BoundSpec, KernelSpec, SpecIssue, _line_of
from kernellsp.source.spec.parse import _lenient_dict, spec_from_dict

_TOML_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?$")


def _toml_key_path(raw: str) -> list[str]:
    """``kernels."my kernel".args`` → ``["kernels", "my kernel", "args"]``."""
    return [
        m.group(1) or m.group(2) or m.group(3)
        for m in re.finditer(r'\s*(?:"([^"]*)"|\'([^\']*)\'|([^.\s"\']+))\s*(?:\.|$)', raw)
    ]


def spec_tables(text: str, prefix: tuple[str, ...] = ("kernels",)) -> dict[str, CommentBlock]:
    """The ``[kernels.NAME]`` tables (with their ``[kernels.NAME.args]`` sub-tables) of a TOML text, or the
    ``NAME = {...}`` lines of a ``[kernels]`` table, as blocks whose lines are the TOML file's lines."""
    from kernellsp.source.model import Span

    lines = text.split("\n")
    rows: dict[str, list[int]] = {}
    current: str | None = None
    in_parent = False
    for i, ln in enumerate(lines):
        m = _TOML_HEADER.match(ln)
        if m and not ln.lstrip().startswith("[["):
            path = tuple(_toml_key_path(m.group(1)))
            in_parent = path == prefix
            current = path[len(prefix)] if path[: len(prefix)] == prefix and len(path) > len(prefix) else None
            if current is not None:
                rows.setdefault(current, []).append(i)
            continue
        if current is not None:
            rows[current].append(i)
        elif in_parent:
            k = re.match(r'^\s*(?:"([^"]+)"|([\w-]+))\s*=', ln)
            if k:
                rows.setdefault(k.group(1) or k.group(2), []).append(i)
    out = {}
    for entry, nums in rows.items():
        out[entry] = CommentBlock(
            "\n".join(lines[i] for i in nums), nums, Span(nums[0], 0, nums[-1], len(lines[nums[-1]])), "toml"
        )
    return out


def workspace_tables(path: str | Path) -> dict[str, CommentBlock]:
    """:func:`spec_tables` of a workspace spec file (kernellsp.toml or pyproject.toml); empty when unreadable."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError:
        return {}
    return _workspace_tables(str(p), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=16)
def _workspace_tables(path: str, _mtime: int, _size: int) -> dict[str, CommentBlock]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    prefix = ("tool", "kernellsp", "kernels") if Path(path).name == "pyproject.toml" else ("kernels",)
    return spec_tables(text, prefix)


def load_workspace_specs(root: Path) -> tuple[dict[str, KernelSpec], list[SpecIssue], str | None]:
    """Specs from ``kernellsp.toml`` (``[kernels.NAME]``) or ``[tool.kernellsp.kernels.NAME]``.

    Returns the specs by entry name, issues (each on its line of that file: ``SpecIssue.path``) and the
    file path they came from.
    """
    for name, getter in (
        ("kernellsp.toml", lambda d: d.get("kernels", {})),
        ("pyproject.toml", lambda d: d.get("tool", {}).get("kernellsp", {}).get("kernels", {})),
    ):
        p = root / name
        if not p.is_file():
            continue
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
            m = re.search(r"at line (\d+)", str(exc))
            return (
                {},
                [SpecIssue("toml", f"not valid TOML: {exc}", int(m.group(1)) - 1 if m else 0, path=str(p))],
                str(p),
            )
        table = getter(data)
        if not table:
            continue
        tables = workspace_tables(p)
        specs: dict[str, KernelSpec] = {}
        issues: list[SpecIssue] = []
        for entry, body in table.items():
            block = tables.get(entry)
            if not isinstance(body, dict):
                issues.append(
                    SpecIssue(
                        f"kernels.{entry}",
                        f"kernels.{entry} must be a table",
                        block.span.start_line if block else 0,
                        path=str(p),
                        entry=entry,
                    )
                )
                continue
            body = dict(body)
            body.pop("file", None)
            spec, errors = spec_from_dict(body)
            for fld, msg, _ in errors:
                issues.append(
                    SpecIssue(
                        fld,
                        f"kernels.{entry}.{fld}: {msg}",
                        _line_of(block, fld) if block else 0,
                        path=str(p),
                        entry=entry,
                    )
                )
            if spec is not None:
                spec.entry = entry
                specs[entry] = spec
        return specs, issues, str(p)
    return {}, [], None


_CUDA_DEF = re.compile(r'(?:__global__|extern\s+"C")[^;{}()]*?\b([A-Za-z_]\w*)\s*\(')


def unknown_workspace_entries(
    root: Path, origin: str | None, specs: dict[str, KernelSpec], max_files: int = 4000
) -> list[SpecIssue]:
    """A ``[kernels.NAME]`` table whose NAME no CUDA file of the workspace defines (a mistyped kernel name is
    otherwise ignored in silence), with the nearest kernel names as suggestions; a ``file = "..."`` it names
    must exist and define NAME."""
    import difflib

    if origin is None:
        return []
    tables = workspace_tables(origin)
    names = set(specs) | set(tables)
    if not names:
        return []
    texts = _workspace_cuda_texts(root, max_files)
    defined = {m.group(1) for t in texts.values() for m in _CUDA_DEF.finditer(t)}
    out: list[SpecIssue] = []
    raw = _raw_workspace_tables(origin)
    for name in sorted(names):
        block = tables.get(name)
        line = block.span.start_line if block else 0
        body = raw.get(name)
        file = body.get("file") if isinstance(body, dict) else None
        if isinstance(file, str):
            issue = _named_file_issue(root, origin, name, file, block, texts)
            if issue is not None:
                out.append(issue)
            continue
        if any(re.search(rf"\b{re.escape(name)}\s*[(<]", t) for t in texts.values()):
            continue
        close = difflib.get_close_matches(name, sorted(defined), n=3)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        out.append(
            SpecIssue(
                "kernels",
                f"kernels.{name}: no kernel or host launcher named {name} in the CUDA files "
                f"under {root}, so this spec is never used{hint}",
                line,
                path=origin,
                entry=name,
            )
        )
    return out


def _workspace_cuda_texts(root: Path, max_files: int) -> dict[Path, str]:
    """The text of every ``.cu``/``.cuh`` file under ``root`` (up to ``max_files``, none over 8 MiB), skipping
    hidden, dependency and build folders."""
    import os

    texts: dict[Path, str] = {}
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [
            d
            for d in dirs
            if not d.startswith(".") and d not in ("node_modules", "__pycache__", "build", "dist")
        ]
        for f in files:
            if f.endswith((".cu", ".cuh")) and len(texts) < max_files:
                fp = Path(dirpath) / f
                try:
                    if fp.stat().st_size <= 8 * 1024 * 1024:
                        texts[fp] = fp.read_text(encoding="utf-8", errors="replace")
                except OSError:
                    continue
    return texts


def _named_file_issue(
    root: Path, origin: str, name: str, file: str, block: CommentBlock | None, texts: dict[Path, str]
) -> SpecIssue | None:
    """The ``file = "..."`` of table NAME must exist and define NAME; ``None`` when it does (or cannot be read)."""
    line = block.span.start_line if block else 0
    fp = (root / file).resolve()
    if not fp.is_file():
        return SpecIssue(
            "file",
            f"kernels.{name}.file: no such file {file!r} (relative to {root})",
            _line_of(block, "file") if block else line,
            path=origin,
            entry=name,
        )
    text = texts.get(fp)
    if text is None:
        try:
            text = fp.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    if not re.search(rf"\b{re.escape(name)}\s*\(", text):
        return SpecIssue(
            "file",
            f"kernels.{name}: {file} defines no function named {name}",
            line,
            path=origin,
            entry=name,
        )
    return None


def partial_workspace_issues(origin: str, entry: str, model: SourceModel) -> list[SpecIssue]:
    """For a workspace spec pydantic refused: the signature check of the rest of it (so every problem shows at
    once), without what the refused fields would have said."""
    body = _raw_workspace_tables(origin).get(entry)
    fn = model.function(entry)
    if not isinstance(body, dict) or fn is None:
        return []
    body = {k: v for k, v in body.items() if k != "file"}
    _, errors = spec_from_dict(body)
    removed = [e[0] for e in errors]
    partial = _lenient_dict(body, removed) if removed else None
    if partial is None:
        return []
    pb = BoundSpec(
        spec=partial,
        entry=entry,
        origin="workspace",
        origin_path=origin,
        table=workspace_tables(origin).get(entry),
    )
    return [
        i
        for i in validate_against(pb, fn, model)
        if not any(
            i.field == r or i.field.startswith(r + ".") or r.startswith(i.field + ".") for r in removed
        )
    ]


def _raw_workspace_tables(origin: str) -> dict[str, Any]:
    p = Path(origin)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError):
        return {}
    table = (
        data.get("tool", {}).get("kernellsp", {}).get("kernels", {})
        if p.name == "pyproject.toml"
        else data.get("kernels", {})
    )
    return table if isinstance(table, dict) else {}


def find_workspace_root(path: Path) -> Path | None:
    """The nearest ancestor holding ``kernellsp.toml``, ``pyproject.toml`` or ``.kernellsp/``."""
    p = path.resolve()
    for d in [p if p.is_dir() else p.parent, *(p if p.is_dir() else p.parent).parents]:
        if (
            (d / "kernellsp.toml").is_file()
            or (d / ".kernellsp").is_dir()
            or (d / "pyproject.toml").is_file()
        ):
            return d
    return None
