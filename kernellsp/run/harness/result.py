"""Reading results: ``DIR/result.json`` of one harness run and the raw buffers next to it, without numpy."""

from __future__ import annotations

import array
import json
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernellsp.run.harness.common import RESULT_FORMAT, Direction, HarnessError, Status
from kernellsp.source.spec import (
    DTYPE_BYTES,
)


def _pick_typecode(size: int, signed: bool) -> str:
    for code in "bhilq" if signed else "BHILQ":
        if array.array(code).itemsize == size:
            return code
    raise HarnessError(f"this Python has no {size}-byte array type")  # pragma: no cover


_ARRAY_CODE = {
    "f32": "f",
    "f64": "d",
    "i8": "b",
    "u8": "B",
    "i16": _pick_typecode(2, True),
    "u16": _pick_typecode(2, False),
    "i32": _pick_typecode(4, True),
    "u32": _pick_typecode(4, False),
    "i64": _pick_typecode(8, True),
    "u64": _pick_typecode(8, False),
}


def decode_buffer(data: bytes | bytearray | memoryview, dtype: str) -> array.array[Any]:
    """Little-endian raw bytes of ``dtype`` as an :class:`array.array`; f16 and bf16 widen to ``'f'``."""
    raw = bytes(data)
    esize = DTYPE_BYTES[dtype]
    if len(raw) % esize:
        raise HarnessError(f"{len(raw)} bytes is not a whole number of {dtype} elements")
    if dtype == "f16":
        return array.array("f", struct.unpack(f"<{len(raw) // 2}e", raw))
    if dtype == "bf16":
        n = len(raw) // 2
        wide = struct.pack(f"<{n}I", *(h << 16 for h in struct.unpack(f"<{n}H", raw)))
        return array.array("f", struct.unpack(f"<{n}f", wide))
    arr = array.array(_ARRAY_CODE[dtype])
    arr.frombytes(raw)
    if sys.byteorder != "little":
        arr.byteswap()
    return arr


@dataclass
class BufferInfo:
    """One buffer argument as the harness reports it in result.json."""

    name: str
    index: int
    ctype: str
    dtype: str
    dir: Direction
    count: int
    bytes: int
    file: str | None = None
    input_file: str | None = None
    hash_before: int | None = None
    hash_after: int | None = None
    digest: int | None = None
    unwritten: int | None = None
    poison_byte: int | None = None
    rep_digests: list[int] | None = None
    rep_unwritten: list[int] | None = None
    #: Placed against a guard page (the canary bytes beside it are checked after every launch).
    guarded: bool = False
    #: Canary bytes beside the buffer found changed: writes out of bounds that missed the guard page.
    guard_damage: int | None = None

    @property
    def mutated(self) -> bool:
        """An ``in`` buffer whose bytes changed during the run (both hashes known and different)."""
        return (
            self.hash_before is not None
            and self.hash_after is not None
            and self.hash_before != self.hash_after
        )


def _hex_or_none(v: Any) -> int | None:
    if v is None:
        return None
    if isinstance(v, str):
        return int(v, 16)
    return int(v)


@dataclass
class SetBuffer:
    """What one input set did to one buffer (check mode): its output file or, for an ``in`` buffer, whether it changed."""

    file: str | None = None
    input_file: str | None = None
    hash_before: int | None = None
    digest: int | None = None
    unwritten: int | None = None
    mutated: bool | None = None


@dataclass
class SetInfo:
    """One input set of a check-mode run (``--sets``): one launch on inputs ``spec`` =
    SEED[:PATTERN][@LAUNCH][+abs][~PREFILL]."""

    index: int
    spec: str
    seed: int
    pattern: str
    launch: int | None
    abs: bool
    buffers: dict[str, SetBuffer]
    #: Host wall seconds of this set's launch and sync (None: not reported).
    launch_s: float | None = None
    #: What the outputs held when the entry started: "poison", "previous" or "garbage".
    prefill: str = "poison"


@dataclass
class SnapshotInfo:
    """The outputs of one timed launch, picked at random after it ran (``--check-launches``)."""

    index: int
    launch: int
    input_seed: int
    buffers: dict[str, SetBuffer]


@dataclass
class HarnessResult:
    """``DIR/result.json`` of one harness run, with helpers that read the raw files next to it."""

    out_dir: Path
    status: Status
    error: str | None
    mode: str | None
    entry: str
    entry_kind: str
    source: str
    shape: int | None
    seed: int
    poison: str
    sizes: dict[str, Any] | None
    scalars: dict[str, Any] | None
    grid: list[int] | None
    block: list[int] | None
    smem: int | None
    device: dict[str, Any] | None
    kernel_attrs: dict[str, Any] | None
    buffers: list[BufferInfo]
    timings_ms: list[float]
    timings_sync_ms: list[float]
    warmup: int
    reps: int
    fresh_inputs: bool
    l2_flush_bytes: int
    persisting_l2_limit_set: bool
    persisting_l2_error: str | None
    pad_bytes: int
    raw: dict[str, Any]
    sets: list[SetInfo] = field(default_factory=list)
    snapshots: list[SnapshotInfo] = field(default_factory=list)
    #: ``{"kind": "guard" | "plain" | "none", "granularity": bytes, "error": why guard pages were not used}``.
    alloc: dict[str, Any] = field(default_factory=dict)
    #: ``{"done", "bytes_per_sm", "sms_covered", "sm_count", "error"}``: shared memory poisoned before each launch.
    smem_poison: dict[str, Any] = field(default_factory=dict)
    #: Device-to-device copy bandwidth measured in time mode (read + written bytes per second).
    copy_bandwidth: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def read_set_bytes(self, index: int, name: str) -> bytes:
        """The raw bytes of out/inout buffer ``name`` after the launch of input set ``index`` (check mode)."""
        sb = self.sets[index].buffers.get(name)
        if sb is None or sb.file is None:
            raise HarnessError(f"set {index} wrote no output file for {name!r}")
        return self._read_exact(sb.file, self.buffer(name).bytes)

    def read_snapshot_bytes(self, index: int, name: str) -> bytes:
        """The raw bytes of out/inout buffer ``name`` after the timed launch kept as snapshot ``index``."""
        sb = self.snapshots[index].buffers.get(name)
        if sb is None or sb.file is None:
            raise HarnessError(f"snapshot {index} has no file for {name!r}")
        return self._read_exact(sb.file, self.buffer(name).bytes)

    def guard_damage(self) -> dict[str, int]:
        """Buffers whose guard canaries changed: bytes written out of bounds (guard pages only)."""
        return {b.name: b.guard_damage for b in self.buffers if b.guard_damage}

    def buffer(self, name: str) -> BufferInfo:
        """The buffer called ``name``; :class:`HarnessError` when the result has none."""
        for b in self.buffers:
            if b.name == name:
                return b
        raise HarnessError(
            f"result has no buffer {name!r} (buffers: {', '.join(b.name for b in self.buffers)})"
        )

    def read_bytes(self, name: str) -> bytes:
        """The raw bytes of out/inout buffer ``name`` after the launch (check mode)."""
        b = self.buffer(name)
        if b.file is None:
            raise HarnessError(f"buffer {name!r} was not written in this run (mode {self.mode}, dir {b.dir})")
        return self._read_exact(b.file, b.bytes)

    def read_input_bytes(self, name: str) -> bytes:
        """The initial bytes of in/inout buffer ``name`` (written with ``--dump-inputs`` or ``--mode inputs``)."""
        b = self.buffer(name)
        if b.input_file is None:
            raise HarnessError(f"the inputs of {name!r} were not dumped (run with --dump-inputs)")
        return self._read_exact(b.input_file, b.bytes)

    def read_buffer(self, name: str) -> array.array[Any]:
        """Out/inout buffer ``name`` as an :class:`array.array` (f16/bf16 widened to float32)."""
        return decode_buffer(self.read_bytes(name), self.buffer(name).dtype)

    def read_input(self, name: str) -> array.array[Any]:
        """In/inout buffer ``name``'s initial contents as an :class:`array.array`."""
        return decode_buffer(self.read_input_bytes(name), self.buffer(name).dtype)

    def read_list(self, name: str) -> list[float] | list[int]:
        """Out/inout buffer ``name`` as a Python list."""
        return self.read_buffer(name).tolist()

    def as_numpy(self, name: str, *, inputs: bool = False) -> Any:
        """The buffer as a numpy array (f16 as float16, bf16 widened to float32); needs numpy."""
        try:
            import numpy as np
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise HarnessError("as_numpy needs numpy; use read_buffer for an array.array instead") from exc
        b = self.buffer(name)
        raw = self.read_input_bytes(name) if inputs else self.read_bytes(name)
        if b.dtype == "bf16":
            return (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        np_dtype = {
            "f16": "<f2",
            "f32": "<f4",
            "f64": "<f8",
            "i8": "i1",
            "u8": "u1",
            "i16": "<i2",
            "u16": "<u2",
            "i32": "<i4",
            "u32": "<u4",
            "i64": "<i8",
            "u64": "<u8",
        }[b.dtype]
        return np.frombuffer(raw, dtype=np_dtype)

    def read_timings(self) -> array.array[Any]:
        """``DIR/timings.bin`` (float64 milliseconds per timed repetition)."""
        raw = (self.out_dir / "timings.bin").read_bytes()
        arr = array.array("d")
        arr.frombytes(raw[: len(raw) - len(raw) % 8])
        if sys.byteorder != "little":
            arr.byteswap()
        return arr

    def mutated_inputs(self) -> list[str]:
        """Names of ``in`` buffers whose contents changed during the run."""
        return [b.name for b in self.buffers if b.mutated]

    def unwritten_outputs(self) -> dict[str, int]:
        """Out buffers with elements still holding the poison pattern after the launch (check mode)."""
        return {b.name: b.unwritten for b in self.buffers if b.unwritten}

    def _read_exact(self, file: str, nbytes: int) -> bytes:
        p = self.out_dir / file
        try:
            data = p.read_bytes()
        except OSError as exc:
            raise HarnessError(f"cannot read {p}: {exc}") from exc
        if len(data) != nbytes:
            raise HarnessError(f"{p} holds {len(data)} bytes; result.json says {nbytes}")
        return data


def read_result(out_dir: str | Path) -> HarnessResult:
    """Read ``out_dir/result.json`` (format ``kernellsp-harness/2``).

    Raises :class:`HarnessError` when the file is missing (the program crashed or was killed before
    it finished), is not JSON, or has another format.
    """
    d = Path(out_dir)
    p = d / "result.json"
    data = _load_result_json(p)
    try:
        buffers = [_buffer_info(b) for b in data.get("buffers") or []]
        sets = [_set_info(s) for s in data.get("sets") or []]
        snapshots = [_snapshot_info(s) for s in data.get("snapshots") or []]
        bw = data.get("copy_bandwidth_bytes_per_s")
        return HarnessResult(
            out_dir=d,
            status=data["status"],
            error=data.get("error"),
            mode=data.get("mode"),
            entry=data.get("entry", ""),
            entry_kind=data.get("entry_kind", ""),
            source=data.get("source", ""),
            shape=data.get("shape"),
            seed=int(data.get("seed") or 0),
            poison=data.get("poison", "nan"),
            sizes=data.get("sizes"),
            scalars=data.get("scalars"),
            grid=data.get("grid"),
            block=data.get("block"),
            smem=data.get("smem"),
            device=data.get("device"),
            kernel_attrs=data.get("kernel_attrs"),
            buffers=buffers,
            timings_ms=[float("nan") if t is None else float(t) for t in data.get("timings_ms") or []],
            timings_sync_ms=[
                float("nan") if t is None else float(t) for t in data.get("timings_sync_ms") or []
            ],
            warmup=int(data.get("warmup") or 0),
            reps=int(data.get("reps") or 0),
            fresh_inputs=bool(data.get("fresh_inputs", False)),
            l2_flush_bytes=int(data.get("l2_flush_bytes") or 0),
            persisting_l2_limit_set=bool(data.get("persisting_l2_limit_set", False)),
            persisting_l2_error=data.get("persisting_l2_error"),
            pad_bytes=int(data.get("pad_bytes") or 0),
            raw=data,
            sets=sets,
            snapshots=snapshots,
            alloc=dict(data.get("alloc") or {}),
            smem_poison=dict(data.get("smem_poison") or {}),
            copy_bandwidth=float(bw) if bw else None,
        )
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise HarnessError(f"{p}: malformed result ({type(exc).__name__}: {exc})") from exc


def _load_result_json(p: Path) -> dict[str, Any]:
    """``result.json`` parsed and checked for its format and status; :class:`HarnessError` otherwise."""
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise HarnessError(f"{p} does not exist: the harness crashed, was killed or never ran") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise HarnessError(f"cannot read {p}: {exc}") from exc
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        raise HarnessError(f"{p} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != RESULT_FORMAT:
        got = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise HarnessError(f"{p} has format {got!r}; expected {RESULT_FORMAT!r}")
    if data.get("status") not in ("ok", "launch_error", "runtime_error", "bad_args"):
        raise HarnessError(f"{p}: unknown status {data.get('status')!r}")
    return data


def _buffer_info(b: Any) -> BufferInfo:
    """One entry of result.json's ``buffers``."""
    return BufferInfo(
        name=b["name"],
        index=int(b.get("index", -1)),
        ctype=b.get("ctype", ""),
        dtype=b["dtype"],
        dir=b["dir"],
        count=int(b["count"]),
        bytes=int(b.get("bytes", int(b["count"]) * DTYPE_BYTES[b["dtype"]])),
        file=b.get("file"),
        input_file=b.get("input_file"),
        hash_before=_hex_or_none(b.get("hash_before")),
        hash_after=_hex_or_none(b.get("hash_after")),
        digest=_hex_or_none(b.get("digest")),
        unwritten=b.get("unwritten"),
        poison_byte=b.get("poison_byte"),
        rep_digests=[int(x, 16) for x in b["rep_digests"]] if b.get("rep_digests") is not None else None,
        rep_unwritten=[int(x) for x in b["rep_unwritten"]] if b.get("rep_unwritten") is not None else None,
        guarded=bool(b.get("guarded", False)),
        guard_damage=b.get("guard_damage"),
    )


def _set_buffers(entries: Any) -> dict[str, SetBuffer]:
    return {
        name: SetBuffer(
            file=v.get("file"),
            input_file=v.get("input_file"),
            hash_before=_hex_or_none(v.get("hash_before")),
            digest=_hex_or_none(v.get("digest")),
            unwritten=v.get("unwritten"),
            mutated=v.get("mutated"),
        )
        for name, v in (entries or {}).items()
    }


def _set_info(s: Any) -> SetInfo:
    """One entry of result.json's ``sets`` (check mode)."""
    return SetInfo(
        index=int(s["index"]),
        spec=str(s["spec"]),
        seed=int(s["seed"]),
        pattern=str(s["pattern"]),
        launch=None if s.get("launch") is None else int(s["launch"]),
        abs=bool(s.get("abs", False)),
        buffers=_set_buffers(s.get("buffers")),
        launch_s=None if s.get("launch_s") is None else float(s["launch_s"]),
        prefill=str(s.get("prefill") or "poison"),
    )


def _snapshot_info(s: Any) -> SnapshotInfo:
    """One entry of result.json's ``snapshots`` (time mode, ``--check-launches``)."""
    return SnapshotInfo(
        index=int(s["index"]),
        launch=int(s["launch"]),
        input_seed=int(s["input_seed"]),
        buffers=_set_buffers(s.get("buffers")),
    )
