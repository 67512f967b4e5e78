"""The Python mirror of the harness's PRNG, structured input patterns, input hash and output digest, so that
every file the harness writes can be checked from Python.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable

from kernellsp.run.harness.common import _FLOAT_MAX, _INT_RANGE, PATTERNS, HarnessError
from kernellsp.run.harness.dists import DistPlan
from kernellsp.run.harness.plan import HarnessPlan
from kernellsp.source.spec import (
    DTYPE_BYTES,
    FLOAT_DTYPES,
)

_M64 = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15
_ARG_MUL = 0xD1B54A32D192ED03
_REP_MUL = 0xA0761D6478BD642F
_TWO_PI = 6.283185307179586


def mix64(z: int) -> int:
    """splitmix64's finaliser (as in the harness)."""
    z &= _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def stream_key(seed: int, arg_index: int) -> int:
    """Key of the input stream of argument ``arg_index`` (0-based, signature order) under ``seed``."""
    return mix64((mix64((seed + _GAMMA) & _M64) + (arg_index + 1) * _ARG_MUL) & _M64)


def draw(key: int, counter: int) -> int:
    """The ``counter``-th 64-bit draw of a stream (element j uses draws 2j and 2j+1)."""
    return mix64((key + (counter + 1) * _GAMMA) & _M64)


def launch_seed(seed: int, launch: int) -> int:
    """Seed of the fresh inputs of timing launch ``launch`` (warm-ups count first), ``--fresh-inputs``."""
    return mix64(seed ^ (((launch + 1) * _REP_MUL) & _M64))


def poison_byte(dtype: str, alt: bool = False) -> int:
    """The byte repeated over every element of an ``out`` buffer before each launch."""
    if dtype in FLOAT_DTYPES:
        return 0xF7 if alt else 0xFF
    return 0x5A if alt else 0xA5


def fnv1a64(data: bytes | bytearray | memoryview) -> int:
    """64-bit FNV-1a of ``data`` (the harness's ``hash_before``/``hash_after``)."""
    h = 0xCBF29CE484222325
    for b in bytes(data):
        h = ((h ^ b) * 0x100000001B3) & _M64
    return h


def digest_bytes(data: bytes | bytearray | memoryview, dtype: str) -> int:
    """The harness's order-independent digest: sum of mix64(bits_j + (j+1)*gamma) mod 2^64."""
    esize = DTYPE_BYTES[dtype]
    raw = bytes(data)
    fmt = {1: "B", 2: "H", 4: "I", 8: "Q"}[esize]
    vals = struct.unpack(f"<{len(raw) // esize}{fmt}", raw[: len(raw) - len(raw) % esize])
    s = 0
    for j, v in enumerate(vals):
        s += mix64((v + (j + 1) * _GAMMA) & _M64)
    return s & _M64


def count_poisoned(data: bytes | bytearray | memoryview, dtype: str, alt: bool = False) -> int:
    """Elements whose bytes all still equal the poison byte (never written by the entry)."""
    esize = DTYPE_BYTES[dtype]
    pat = bytes([poison_byte(dtype, alt)]) * esize
    raw = bytes(data)
    return sum(1 for j in range(0, len(raw) - esize + 1, esize) if raw[j : j + esize] == pat)


def _floor(v: float) -> float:
    return float(math.floor(v)) if math.isfinite(v) else v


def _round_half_away(v: float) -> float:
    f = _floor(v)
    d = v - f
    if d > 0.5:
        return f + 1.0
    if d < 0.5:
        return f
    return f + 1.0 if v >= 0.0 else f


def _to_f32(v: float) -> float:
    try:
        return struct.unpack("<f", struct.pack("<f", v))[0]
    except OverflowError:
        return math.copysign(math.inf, v)


def _pack(dtype: str, int_path: bool, fv: float, iv: int) -> bytes:
    if dtype == "f64":
        return struct.pack("<d", fv)
    if dtype == "f32":
        return struct.pack("<f", _to_f32(fv))
    if dtype == "f16":
        f = _to_f32(fv)
        try:
            return struct.pack("<e", f)
        except OverflowError:
            return struct.pack("<H", 0xFC00 if f < 0 else 0x7C00)
    if dtype == "bf16":
        (bits,) = struct.unpack("<I", struct.pack("<f", _to_f32(fv)))
        return struct.pack("<H", ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF)
    size = DTYPE_BYTES[dtype]
    lo, hi = _INT_RANGE[dtype]
    if int_path:
        u = iv & ((1 << (8 * size)) - 1)
    else:
        dlo, dhi = float(lo), float(hi)
        if dtype in ("i64", "u64"):
            dhi = 2.0**63 if dtype == "i64" else 2.0**64
        if fv != fv:
            x = 0
        elif fv <= dlo:
            x = lo
        elif fv >= dhi:
            x = hi
        else:
            x = int(fv)
        u = x & ((1 << (8 * size)) - 1)
    return u.to_bytes(size, "little")


def _element(d: DistPlan, dtype: str, j: int, key: int) -> tuple[bool, float, int]:
    is_float = dtype in FLOAT_DTYPES
    f, i = d.fparams, d.iparams
    if d.kind == "uniform":
        fv = f[0] + (f[1] - f[0]) * ((draw(key, 2 * j) >> 11) * 2.0**-53)
        return False, (fv if is_float else _floor(fv)), 0
    if d.kind == "normal":
        u1 = float((draw(key, 2 * j) >> 11) + 1) * 2.0**-53
        u2 = (draw(key, 2 * j + 1) >> 11) * 2.0**-53
        z = math.sqrt(-2.0 * math.log(u1)) * math.cos(_TWO_PI * u2)
        fv = f[0] + f[1] * z
        return False, (fv if is_float else _round_half_away(fv)), 0
    if d.kind == "randint":
        rng = (i[1] - i[0]) & _M64
        u = (i[0] + ((draw(key, 2 * j) * rng) >> 64)) & _M64
        iv = u - (1 << 64) if u >= 1 << 63 else u
        return True, float(iv), iv
    if d.kind == "ones":
        return True, 1.0, 1
    if d.kind == "arange":
        if is_float:
            return False, f[0] + float(j) * f[1], 0
        u = (i[0] + j * i[1]) & _M64
        return True, 0.0, u - (1 << 64) if u >= 1 << 63 else u
    if d.kind == "choice":
        k = (draw(key, 2 * j) * len(f)) >> 64
        return True, f[k], i[k]
    if is_float:
        return False, -1.0 + 2.0 * ((draw(key, 2 * j) >> 11) * 2.0**-53), 0
    iv = (draw(key, 2 * j) * 100) >> 64
    return True, float(iv), iv


#: sqrt(3), the half-width of a uniform distribution of unit standard deviation (the C++ kSqrt3).
_SQRT3 = 1.7320508075688772
_WIDE_BINADES = {"f16": 10, "bf16": 24, "f32": 24, "f64": 48}


def _pattern_applies(d: DistPlan, dtype: str, pattern: str = "spikes") -> tuple[bool, int, int] | None:
    """None when ``pattern`` leaves this buffer to the spec's fill; else (integral, lo, range)."""
    is_float = dtype in FLOAT_DTYPES
    if pattern == "tail":  # far out in the tails: only a normal distribution reaches there
        return (False, 0, 0) if is_float and d.kind == "normal" else None
    if pattern == "offset":  # a large mean: f32/f64 only (that far out f16/bf16 noise keeps 1 to 4 bits)
        return (False, 0, 0) if dtype in ("f32", "f64") and d.kind == "normal" else None
    if d.kind == "randint":
        return True, d.iparams[0], (d.iparams[1] - d.iparams[0]) & _M64
    if d.kind == "default" and not is_float:
        return True, 0, 100
    if is_float and d.kind in ("default", "uniform", "normal"):
        return False, 0, 0
    return None


def pattern_applies(d: DistPlan, dtype: str, pattern: str = "spikes") -> bool:
    """Whether ``pattern`` changes a buffer of ``dtype`` drawn from ``d`` (else it keeps the spec's fill)."""
    return _pattern_applies(d, dtype, pattern) is not None


def _pattern_float(pat: str, j: int, count: int, dtype: str, lo: float, hi: float, key: int) -> float:
    x1, x2 = draw(key, 2 * j), draw(key, 2 * j + 1)
    u = (x1 >> 11) * 2.0**-53
    c = lo if lo > 0.0 else hi if hi < 0.0 else 0.0
    up, dn = hi - c, c - lo
    s = 1.0 if up >= dn else -1.0
    big, small = (up, dn) if up >= dn else (dn, up)
    spike = c + s * (big * (0.5 + 0.5 * u))
    v = c
    if pat == "tail":
        if (x2 * 64) >> 64 != 0:
            return c
        mean, sd = 0.5 * (lo + hi), (hi - lo) / 6.0
        far = sd * math.ldexp(1.0 + u, 2 + ((((x2 << 8) & _M64) * 6) >> 64))
        t = mean + far if x2 & 1 else mean - far
        m = _FLOAT_MAX[dtype]
        return -m if t < -m else m if t > m else t
    if pat == "offset":
        x0 = draw(key, _M64)
        mean, sd = 0.5 * (lo + hi), (hi - lo) / 6.0
        shift = sd * math.ldexp(1.0 + (x0 >> 11) * 2.0**-53, 7)
        centre = mean + shift if x0 & 1 else mean - shift
        return centre + sd * ((2.0 * u - 1.0) * _SQRT3)
    if pat == "spikes":
        if (x2 * 64) >> 64 == 0:
            v = spike
    elif pat == "alternating":
        if (draw(key, 2 * (j & ~1) + 1) * 32) >> 64 == 0:
            v = spike if j % 2 == 0 else c - s * (small * (0.25 + 0.25 * u))
    elif pat == "ramp":
        if (x2 >> 11) * 2.0**-53 < (float(j) + 0.5) / float(count) * 0.0625:
            v = spike
    elif (x2 * 64) >> 64 == 0:  # wide
        low = x2 | (1 << _WIDE_BINADES[dtype])
        e = (low & -low).bit_length() - 1
        mag = math.ldexp(0.5 + 0.5 * u, -e)
        v = c - s * (small * mag) if small > 0.0 and (x2 >> 48) & 7 == 0 else c + s * (big * mag)
    return lo if v < lo else hi if v > hi else v


def _pattern_int_offset(pat: str, j: int, rng: int, key: int) -> int:
    x1, x2 = draw(key, 2 * j), draw(key, 2 * j + 1)
    if pat == "spikes":
        return (x1 * rng) >> 64 if (x2 * 64) >> 64 == 0 else 0
    if pat == "alternating":
        q = max(rng // 4, 1)
        return rng - 1 - ((x1 * q) >> 64) if j % 2 == 0 else (x1 * q) >> 64
    if pat == "ramp":
        return j % rng
    bits = min(rng.bit_length() - 1, 63)
    r = rng >> ((x1 * (bits + 1)) >> 64)
    return (x2 * max(r, 1)) >> 64


def _pattern_range(d: DistPlan, dtype: str) -> tuple[float, float]:
    if d.kind == "uniform":
        return d.fparams[0], d.fparams[1]
    if d.kind == "normal":
        w, m = 3.0 * d.fparams[1], _FLOAT_MAX[dtype]
        return max(d.fparams[0] - w, -m), min(d.fparams[0] + w, m)
    return -1.0, 1.0


def _abs_bytes(data: bytearray, esize: int) -> None:
    for k in range(esize - 1, len(data), esize):
        data[k] &= 0x7F


def fill_reference(
    plan: HarnessPlan,
    shape: int,
    seed: int,
    name: str,
    *,
    launch: int | None = None,
    pattern: str = "spec",
    abs: bool = False,
) -> bytes:
    """The initial bytes of input buffer ``name`` that the harness uploads for ``shape`` and ``seed``.

    Bit-identical to the harness's host fill for every distribution except ``normal``, whose
    ``log``/``cos`` come from the platform's libm (identical on the same host, within an ulp elsewhere).
    ``launch`` gives the device fill of that timing launch under ``--fresh-inputs`` (where ``normal``
    uses the GPU's libm and may differ in the last bit). ``pattern`` and ``abs`` give the input set
    ``SEED:PATTERN[+abs]`` of check mode (:func:`input_set`). Pure Python: meant for small shapes and tests.
    """
    count = plan.shapes[shape].counts[name]
    return reference_elements(plan, shape, seed, name, range(count), launch=launch, pattern=pattern, abs=abs)


def reference_elements(
    plan: HarnessPlan,
    shape: int,
    seed: int,
    name: str,
    indices: Iterable[int],
    *,
    launch: int | None = None,
    pattern: str = "spec",
    abs: bool = False,
) -> bytes:
    """The bytes of the elements ``indices`` of :func:`fill_reference`'s buffer, in that order: every element
    depends only on its index, so a large buffer can be checked at chosen positions."""
    a = plan.arg(name)
    if not a.is_buffer or a.dir not in ("in", "inout"):
        raise HarnessError(f"{name!r} is not an input buffer of {plan.entry}")
    if pattern not in PATTERNS:
        raise HarnessError(f"unknown input pattern {pattern!r}")
    sp = plan.shapes[shape]
    d = sp.dists[name]
    assert a.dtype is not None
    key = stream_key(seed if launch is None else launch_seed(seed, launch), a.index)
    applies = _pattern_applies(d, a.dtype, pattern) if pattern != "spec" else None
    count = sp.counts[name]
    lo, hi = _pattern_range(d, a.dtype) if applies is not None and not applies[0] else (0.0, 0.0)
    out = bytearray()
    for j in indices:
        if applies is None:
            int_path, fv, iv = _element(d, a.dtype, j, key)
        elif applies[0]:
            u = (applies[1] + _pattern_int_offset(pattern, j, applies[2], key)) & _M64
            iv = u - (1 << 64) if u >= 1 << 63 else u
            int_path, fv = True, float(iv)
        else:
            int_path, fv, iv = False, _pattern_float(pattern, j, count, a.dtype, lo, hi, key), 0
        out += _pack(a.dtype, int_path and a.dtype not in FLOAT_DTYPES, fv, iv)
    if abs and a.dtype in FLOAT_DTYPES:
        _abs_bytes(out, DTYPE_BYTES[a.dtype])
    return bytes(out)
