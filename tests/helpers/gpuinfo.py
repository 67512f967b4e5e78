"""The GPU model a GPU test or benchmark ran on, and the short name its result files carry.

Result files are named per GPU model (``profile-h100.md``, ``samples-h200/``, ``aa-h100.json``)
because timings compare only between runs on the same model. Imported by the GPU tests (``tests/``
is on sys.path through the rootdir conftest) and by the scripts in ``tests/bench/``.
"""

from __future__ import annotations

import subprocess


def local_gpu_name() -> str:
    """The first GPU's name from nvidia-smi, or ``""`` when there is none (or no driver)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = out.strip().splitlines()
    return lines[0].strip() if lines else ""


def gpu_slug(name: str) -> str:
    """``NVIDIA H100 80GB HBM3`` → ``h100``, ``NVIDIA H200`` → ``h200``, another model → its name in
    lower case with dashes, no GPU (``""``) → ``cpu``."""
    if "H100" in name:
        return "h100"
    if "H200" in name:
        return "h200"
    return "".join(ch if ch.isalnum() else "-" for ch in name.lower()).strip("-") or "cpu"
