"""Content-hash cache (diskcache) shared by builds and profiles.

Keys are SHA-256 digests of everything that decides a result (source bytes, flags, tool versions,
GPU identity); values are plain JSON-able dicts. The cache lives in ``$KERNELLSP_CACHE_DIR`` or
``~/.cache/kernellsp``; ``KERNELLSP_NO_CACHE=1`` turns it off. A broken cache directory degrades
to no cache rather than failing a check.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from functools import lru_cache
from pathlib import Path
from typing import Any

#: Bump when the shape of cached values changes.
CACHE_SCHEMA = "3"


def cache_dir() -> Path:
    env = os.environ.get("KERNELLSP_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kernellsp"


@lru_cache(maxsize=4)
def _open(path: str) -> Any:
    import diskcache

    return diskcache.Cache(path, size_limit=2**30)


def _cache() -> Any | None:
    if os.environ.get("KERNELLSP_NO_CACHE") == "1":
        return None
    try:
        return _open(str(cache_dir()))
    except Exception:  # an unwritable or corrupt cache directory must not break analysis
        return None


def digest(*parts: str | bytes | None) -> str:
    """A stable key over ``parts`` (order matters; ``None`` is distinct from ``""``)."""
    h = hashlib.sha256(CACHE_SCHEMA.encode())
    for p in parts:
        if p is None:
            h.update(b"\x00none")
        else:
            b = p if isinstance(p, bytes) else p.encode("utf-8", errors="replace")
            h.update(len(b).to_bytes(8, "little"))
            h.update(b)
    return h.hexdigest()


def get(namespace: str, key: str) -> dict[str, Any] | None:
    c = _cache()
    if c is None:
        return None
    try:
        raw = c.get(f"{namespace}:{key}")
    except Exception:
        return None
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def put(namespace: str, key: str, value: dict[str, Any], expire_s: float | None = None) -> None:
    c = _cache()
    if c is None:
        return
    with contextlib.suppress(Exception):
        c.set(f"{namespace}:{key}", json.dumps(value), expire=expire_s)


def clear() -> None:
    """Drop every cached entry (``kernellsp cache clear``)."""
    c = _cache()
    if c is not None:
        c.clear()
    # Harness binaries built by the local runner (kernellsp.run.runner.Runner.cached_build) live beside it.
    shutil.rmtree(cache_dir() / "bin", ignore_errors=True)
