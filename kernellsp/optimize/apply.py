"""Writing a verified result into the user's file, and taking it back: the file is written only when it
is unchanged since the run began, after a backup in ``.kernellsp/backups/``; :func:`revert` restores it.
A result that cannot be applied is saved beside the file (:func:`side_file`)."""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernellsp.optimize.evidence import _hash, _read_json, state_dir

if TYPE_CHECKING:
    from kernellsp.optimize.result import OptimizeResult


class ApplyError(RuntimeError):
    """The result could not be written; the user's file is untouched."""


def side_file(path: Path, text: str) -> Path:
    """Save a verified result next to ``path`` (``NAME.kernellsp.cu``, or ``NAME.kernellsp-2.cu`` ... when that
    exists: an earlier result is never overwritten) when it cannot be applied."""
    side = path.with_name(path.stem + ".kernellsp" + path.suffix)
    n = 2
    while side.exists():
        side = path.with_name(f"{path.stem}.kernellsp-{n}{path.suffix}")
        n += 1
    encoding = _encoding_of(path) if path.exists() else "utf-8"
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        encoding = "utf-8"
    _write_text(side, text, encoding)
    return side


def _read_user_text(path: Path) -> str:
    """The file's text exactly as the CLI and the editor read it (line endings kept, latin-1 fallback)."""
    from kernellsp.source.files import read_source

    text, err = read_source(path)
    if text is None:
        raise ApplyError(f"{path}: {err}")
    return text


def _encoding_of(path: Path) -> str:
    """How :func:`_read_user_text` decoded the file: UTF-8, or latin-1 for bytes that are not UTF-8."""
    try:
        path.read_bytes().decode("utf-8")
        return "utf-8"
    except (UnicodeDecodeError, OSError):
        return "latin-1"


def _write_bytes(path: Path, data: bytes, like: Path | None = None) -> None:
    """Write atomically (temp file + rename), keeping ``like``'s permission bits."""
    tmp = path.with_name(path.name + ".kernellsp-tmp")
    tmp.write_bytes(data)
    if like is not None and like.exists():
        shutil.copymode(like, tmp)
    tmp.replace(path)


def _write_text(path: Path, text: str, encoding: str = "utf-8", like: Path | None = None) -> None:
    """Write ``text`` byte for byte (no newline translation) in ``encoding``, atomically."""
    _write_bytes(path, text.encode(encoding), like)


def _backup_entries(index: Path) -> list[dict[str, Any]]:
    """The backup index, checked: a list of records naming the file, its backup and the written text's hash."""
    entries = _read_json(index, ApplyError) if index.is_file() else []
    keys = ("file", "backup", "written_hash")
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and all(isinstance(e.get(k), str) for k in keys) for e in entries
    ):
        raise ApplyError(
            f"{index} cannot be read (expected a list of backup records); it was edited or damaged"
        )
    return entries


def record_backup(
    path: Path, original: str, written: str, bundle: str | None, encoding: str = "utf-8"
) -> Path:
    """Keep ``original`` (in the file's ``encoding``) in ``.kernellsp/backups`` and note what replaced it
    (for :func:`revert`)."""
    backups = state_dir(path) / "backups"
    backups.mkdir(parents=True, exist_ok=True)
    index = backups / "index.json"
    entries = _backup_entries(index)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    backup = backups / f"{path.name}.{stamp}.bak"
    _write_text(backup, original, encoding)
    entries.append(
        {
            "file": str(path.resolve()),
            "backup": str(backup),
            "written_hash": _hash(written),
            "bundle": bundle,
            "time": stamp,
        }
    )
    _write_text(index, json.dumps(entries, indent=1) + "\n")
    return backup


def replace_user_file(path: Path, original: str, new: str, bundle: str | None = None) -> Path:
    """Write ``new`` over the user's file as :func:`apply_result` does (its own encoding, atomically, its
    permission bits kept) after keeping ``original`` as a backup :func:`revert` restores; the backup's path."""
    encoding = _encoding_of(path)
    backup = record_backup(path, original, new, bundle, encoding)
    _write_text(path, new, encoding, like=path)
    return backup


def apply_result(path: Path, result: OptimizeResult) -> Path:
    """Write the champion to ``path`` if the file still holds the original text; return the backup path.

    A symlink is followed (the file it names is edited); the file's mode is kept; a read-only file (no write
    permission, or no write bit at all) is refused: replacing it would only need the directory's.
    """
    if not result.accepted:
        raise ApplyError("nothing to apply: no candidate passed every gate")
    path = path.resolve()
    current = _read_user_text(path)
    if current != result.original_text:
        side = side_file(path, result.champion_text)
        raise ApplyError(
            f"{path} changed since the run began; the verified result was saved beside it as {side}"
        )
    if (
        not os.access(path, os.W_OK) or not path.stat().st_mode & 0o222
    ):  # no write bit: read-only even for root
        side = side_file(path, result.champion_text)
        raise ApplyError(f"{path} is read-only; the verified result was saved beside it as {side}")
    encoding = _encoding_of(path)
    try:
        result.champion_text.encode(encoding)
    except UnicodeEncodeError:
        side = side_file(path, result.champion_text)
        raise ApplyError(
            f"{path} is {encoding} text and the result has characters {encoding} cannot hold; it was "
            f"saved beside it (UTF-8) as {side}"
        ) from None
    backup = record_backup(path, current, result.champion_text, result.bundle, encoding)
    _write_text(path, result.champion_text, encoding, like=path)
    return backup


def revert(path: Path, force: bool = False) -> Path:
    """Restore the newest backup of ``path``; refuses if the file changed since kernellsp wrote it.

    With ``force`` the text being replaced is kept too (``NAME.TIME.before-revert.bak`` beside the backups).
    """
    path = path.resolve()
    index = state_dir(path) / "backups" / "index.json"
    entries = _backup_entries(index)
    mine = [e for e in entries if e["file"] == str(path)]
    if not mine:
        raise ApplyError(f"no kernellsp backup of {path} (nothing was applied to it)")
    last = mine[-1]
    if not Path(last["backup"]).is_file():
        raise ApplyError(f"the backup {last['backup']} of {path} is gone; nothing to restore")
    if path.exists():
        current = _read_user_text(path)
        if _hash(current) != last["written_hash"]:
            if not force:
                raise ApplyError(
                    f"{path} changed after kernellsp wrote it; use --force to restore {last['backup']} anyway"
                )
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
            shutil.copy2(path, index.parent / f"{path.name}.{stamp}.before-revert.bak")
    elif not force:
        raise ApplyError(f"{path} no longer exists; use --force to restore {last['backup']} there")
    _write_bytes(path, Path(last["backup"]).read_bytes(), like=path if path.exists() else None)
    entries.remove(last)
    _write_text(index, json.dumps(entries, indent=1) + "\n")
    return Path(last["backup"])
