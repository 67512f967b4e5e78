"""Device-only builds: the entry's device code as a cubin, the host side built once per plan.

A save in the editor changes a kernel's body, rarely its launch spec or its parameter list. The usual
split build (:mod:`kernellsp.run.harness_build`) still compiles the whole entry unit for every change:
the preprocessor twice, ``cudafe++``, ``cicc``, ``ptxas`` and the host compiler, then a link (about
1.4 s on the H100 host, of which the device part is a third). A device-only build splits it along that
line instead:

* the **cubin**: the same entry unit (the runtime's interface, the plan's tables, the user's file and
  the glue) compiled with ``nvcc -cubin``: only ``cicc`` and ``ptxas`` run, and the device code is the
  one the usual build would link (same translation unit, same flags);
* the **host harness**: an entry unit without the user's file (:func:`generate_harness` with
  ``cubin=True``), whose glue looks the entry up by name in the cubin given with ``--cubin`` and
  launches it through the driver API (``harness_runtime.h``, "The device-only build's entry"). Its
  text depends on the plan only, so it is built once and then comes from the binary cache.

:func:`cubin_unsupported` says when this cannot stand in for the usual build: host launchers (their
host code must be compiled), templates and overloaded names (the entry is found by name), parameter
types the host side cannot spell without the user's file, and flags that do more than compile device
code (libraries, relocatable device code). The harness refuses at run time too, with a message that
starts with :data:`CUBIN_FAILURE` (another parameter list, no driver support), on which the caller
builds the usual way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from kernellsp.run.harness.plan import HarnessPlan
from kernellsp.source.model import SourceModel

#: The start of the harness's message when it cannot use the cubin (result.json's ``error``).
CUBIN_FAILURE = "cubin entry:"

#: Scalar parameter types the host glue can spell without the user's file: source spelling -> host type.
_SCALARS: dict[str, str] = {
    "bool": "bool",
    "char": "char",
    "signed char": "signed char",
    "unsigned char": "unsigned char",
    "short": "short",
    "short int": "short",
    "signed short": "short",
    "unsigned short": "unsigned short",
    "unsigned short int": "unsigned short",
    "int": "int",
    "signed": "int",
    "signed int": "int",
    "unsigned": "unsigned int",
    "unsigned int": "unsigned int",
    "long": "long",
    "long int": "long",
    "unsigned long": "unsigned long",
    "unsigned long int": "unsigned long",
    "long long": "long long",
    "long long int": "long long",
    "unsigned long long": "unsigned long long",
    "unsigned long long int": "unsigned long long",
    "float": "float",
    "double": "double",
    **{
        f"{p}{t}": f"std::{t}"
        for p in ("", "std::")
        for t in (
            *("size_t", "ptrdiff_t"),
            *("int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t", "int64_t", "uint64_t"),
        )
    },
}

#: Qualifiers that do not change how an argument is passed.
_QUALIFIERS = re.compile(r"\b(?:const|volatile|__restrict__|__restrict|restrict|__grid_constant__)\b")

#: Flags that only steer device compilation (or name the host compiler, which a cubin build ignores):
#: with anything else (libraries, -rdc, host-only options) the usual build runs.
_FLAG_ALONE = re.compile(
    r"^(?:-D\S+|-U\S+|-I\S+|--?std=\S+|-O[0-3]|-lineinfo|--?use_fast_math|--extended-lambda|"
    r"--expt-extended-lambda|--expt-relaxed-constexpr|--?(?:ftz|prec-div|prec-sqrt|fmad)=(?:true|false)|"
    r"--?maxrregcount=\d+|-Xptxas=\S+|--ptxas-options=\S+|-G|--device-debug|-w|--disable-warnings|"
    r"-diag-suppress=\S+|--diag-suppress=\S+|--?default-stream=\S+)$"
)
#: Flags followed by their value.
_FLAG_WITH_VALUE = frozenset(
    {
        "-D",
        "-U",
        "-I",
        "-Xptxas",
        "--ptxas-options",
        "-maxrregcount",
        "--maxrregcount",
        "-ccbin",
        "--compiler-bindir",
    }
)


def host_type(ctype: str) -> str | None:
    """How the host glue spells a parameter of source type ``ctype``: ``void*`` for any pointer, the
    builtin type for a builtin scalar, ``None`` when it cannot be spelt without the user's file."""
    t = " ".join(_QUALIFIERS.sub(" ", ctype).split())
    if "&" in t or "[" in t or "(" in t:
        return None
    if t.endswith("*"):
        return "void*"
    return _SCALARS.get(t)


def cubin_unsupported(plan: HarnessPlan, model: SourceModel, flags: Sequence[str]) -> str | None:
    """Why ``plan``'s entry needs the usual build; ``None`` when a device-only build can run it."""
    if plan.kind != "global":
        return "a host launcher: its host code must be compiled"
    defs = [f for f in model.functions if f.name == plan.entry and f.has_body]
    if len(defs) != 1:
        return f"{len(defs)} definitions of {plan.entry}: the cubin entry is found by name"
    if defs[0].template_params is not None:
        return "a template: the cubin entry is found by name"
    for a in plan.args:
        if host_type(a.ctype) is None:
            return f"parameter {a.name} ({a.ctype}) cannot be spelt without the user's file"
    bad = unsupported_flag(flags)
    if bad is not None:
        return f"the flag {bad} needs the usual build"
    return None


def unsupported_flag(flags: Sequence[str]) -> str | None:
    """The first flag that does more than steer device compilation, if any."""
    i = 0
    while i < len(flags):
        f = flags[i]
        if f in _FLAG_WITH_VALUE and i + 1 < len(flags):
            i += 2
            continue
        if not _FLAG_ALONE.match(f):
            return f
        i += 1
    return None


def cubin_compile_command(
    harness_cu: str, cubin: str, arch: str, extra_flags: Iterable[str] = (), nvcc: str = "nvcc"
) -> list[str]:
    """``nvcc -cubin -O3 -arch=ARCH -lineinfo [-std=c++17] EXTRA... -o CUBIN HARNESS.cu``: the entry
    unit's device code only, with the flags of the usual build (so the same SASS)."""
    extra = list(extra_flags)
    cmd = [nvcc, "-cubin", "-O3", f"-arch={arch}", "-lineinfo"]
    if not any(f.startswith(("-std", "--std")) for f in extra):
        cmd.append("-std=c++17")
    return [*cmd, *extra, "-o", cubin, harness_cu]


def cubin_glue(plan: HarnessPlan) -> list[str]:
    """The runtime's hooks for a device-only build: the entry comes from the cubin, not the user's file."""
    G: list[str] = []
    w = G.append
    w("cudaError_t kernellsp_h::entry_prepare(int kl_shape) { return kernellsp_h::cubin_prepare(kl_shape); }")
    w(
        "bool kernellsp_h::entry_attributes(cudaFuncAttributes* kl_attr) { return kernellsp_h::cubin_attributes(kl_attr); }"
    )
    w("void kernellsp_h::entry_launch(int kl_shape, void* const* kl_ptrs) {")
    w("  (void)kl_shape;")
    w("  (void)kl_ptrs;")
    for a in plan.args:
        t = host_type(a.ctype)
        assert t is not None, a.ctype
        if a.is_buffer or t == "void*":
            w(f"  void* kl_a{a.index} = kl_ptrs[{a.index}];")
        else:
            w(f"  {t} kl_a{a.index} = kernellsp_h::scalar_arg<{t}>(kl_shape, {a.index});")
    n = len(plan.args)
    if n:
        w(f"  void* kl_args[] = {{{', '.join(f'&kl_a{a.index}' for a in plan.args)}}};")
        w(f"  const std::size_t kl_sizes[] = {{{', '.join(f'sizeof kl_a{a.index}' for a in plan.args)}}};")
        w(f"  kernellsp_h::cubin_launch(kl_shape, kl_args, kl_sizes, {n});")
    else:
        w("  kernellsp_h::cubin_launch(kl_shape, nullptr, nullptr, 0);")
    w("}")
    return G
