"""The recipe framework: what a recipe module declares, receives and returns.

A recipe is one module of this package that opens with its metadata and defines two functions::

    NAME = "map-vectorize"              # stable name (memory keys, --explain, diagnostics)
    ARCHETYPE = "map"                   # the kernel shape it recognises (corpus manifest vocabulary)
    RULES = ("KL501", "KL510")          # rule codes it answers (rules/*.toml)
    PARAMS = {"items": [2, 1, 4]}       # search space; the first value of each is the default

    def match(ctx: RecipeContext) -> Match | Decline: ...
    def generate(ctx: RecipeContext, m: Match, params: dict[str, Any]) -> Rewrite: ...

and optionally ``def points(ctx, m) -> list[dict]`` (the parameter points to try, best guess first;
the default is the default point followed by one-parameter variations of it).

``match`` works on the kernel IR (:mod:`kernellsp.source.ir`, ``ctx.ir``) and binds to the user's
own names: ``Match.binding`` is what ``kernellsp optimize --explain`` prints (which parameter is the
input or the output, the index variable, the bound, the dtype...), ``Match.data`` is whatever the
recipe wants to hand to ``generate``. ``Decline.reason`` says, in a sentence a CUDA programmer
understands, why the recipe does not apply. ``generate`` returns the new kernel definition (the
original signature, template line included, with a new body; :func:`signature_text` gives it) and,
for ``__global__`` entries only, a new launch configuration for the spec's structured ``launch``
field. A host-launched kernel (``ctx.host_launched``) works under the launch the host code gives
(``ctx.launch_site``), or under a new grid and block for that launch (``Rewrite.host_config``, written
with the launcher's own names: the only host code a rewrite may change, docs/scope.md); no kernel
signature changes (only ``const``, ``__restrict__`` and ``__launch_bounds__`` may be added). No new ``__global__``
kernels, no file-scope state; new ``__device__`` helpers may precede the kernel in ``code``.

Every candidate still passes the scope, compile, correctness, sanitizer and timing gates; a
recipe is a proposal, never a verdict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kernellsp.source import exprs
from kernellsp.source import spec as specmod
from kernellsp.source.ir import KernelIR, kernel_ir
from kernellsp.source.ir.canon import Canonical, canonicalize
from kernellsp.source.ir.launch import KernelLaunch
from kernellsp.source.model import Function, LaunchSite, SourceModel

#: C element types by spec dtype (what a recipe declares registers and shared arrays with).
DTYPE_CTYPE = specmod.DTYPE_CTYPE
#: Bytes of C element types recipes handle (after typedef-free normalisation).
CTYPE_BYTES = {
    "float": 4,
    "double": 8,
    "__half": 2,
    "half": 2,
    "__nv_bfloat16": 2,
    "nv_bfloat16": 2,
    "int": 4,
    "unsigned int": 4,
    "unsigned": 4,
    "int32_t": 4,
    "uint32_t": 4,
    "signed": 4,
    "char": 1,
    "signed char": 1,
    "unsigned char": 1,
    "uint8_t": 1,
    "int8_t": 1,
    "uchar": 1,
    "short": 2,
    "unsigned short": 2,
    "int16_t": 2,
    "uint16_t": 2,
    "long": 8,
    "long long": 8,
    "unsigned long": 8,
    "unsigned long long": 8,
    "size_t": 8,
    "int64_t": 8,
    "uint64_t": 8,
    "long int": 8,
    "long long int": 8,
}


@dataclass
class Match:
    """A recipe applies: how it binds to this kernel (for --explain) and its private analysis."""

    binding: dict[str, str]
    data: Any = None
    #: The kernel the rewrite replaces (the entry, or a kernel a host launcher launches).
    kernel: str = ""


@dataclass
class Decline:
    """A recipe does not apply; ``reason`` names what it needs and did not find."""

    reason: str
    kernel: str = ""


@dataclass
class Rewrite:
    """A generated kernel: ``code`` replaces the kernel's definition; ``launch`` the spec's launch."""

    kernel: str
    code: str
    launch: specmod.LaunchSpec | None = None
    #: Includes from the scope gate's allow-list the code needs (prefer none).
    includes: list[str] = field(default_factory=list)
    #: For a host-launched kernel: new grid and block expressions (host code) for its launch sites in the
    #: entry launcher, the only host code a rewrite may change (``None``: the host's launch stays).
    host_config: tuple[str, str] | None = None


class RecipeError(RuntimeError):
    """``generate`` could not produce code for these parameters (the candidate is skipped)."""


@dataclass
class RecipeContext:
    """Everything a recipe sees about one kernel of one entry."""

    model: SourceModel
    entry: str
    entry_fn: Function
    kernel: Function
    ir: KernelIR
    spec: specmod.BoundSpec | None
    #: The entry is a host launcher and ``kernel`` one of the kernels it launches.
    host_launched: bool = False
    launch_site: LaunchSite | None = None
    #: The canonicalisation that produced ``model`` (its fired passes are printed by ``--explain``).
    canon: Canonical | None = None

    @property
    def text(self) -> str:
        return self.model.text

    # -- arguments ---------------------------------------------------------------------------------

    def arg_spec(self, param: str) -> specmod.ArgSpec | None:
        """The spec's description of a kernel parameter (through the launch site for host launchers)."""
        if self.spec is None:
            return None
        if not self.host_launched:
            return self.spec.spec.args.get(param)
        host_name = self.host_arg(param)
        return self.spec.spec.args.get(host_name) if host_name else None

    def host_arg(self, param: str) -> str | None:
        """For a host-launched kernel: the launch-site argument text passed for ``param``."""
        if self.launch_site is None:
            return None
        p = self.ir.param(param)
        if p is None or p.position >= len(self.launch_site.args):
            return None
        return self.launch_site.args[p.position].strip()

    def template_map(self) -> dict[str, str]:
        """Template parameter -> concrete type, from the launch site's ``<...>`` or the spec's dtypes."""
        tp = self.kernel.template_params
        if not tp:
            return {}
        names = re.findall(r"(?:typename|class)\s+([A-Za-z_]\w*)", tp)
        out: dict[str, str] = {}
        if self.launch_site is not None and self.launch_site.template_args:
            vals = [v.strip() for v in self.launch_site.template_args.strip("<>").split(",")]
            # A launcher template passing its own parameter on (`k<T><<<...>>>`) says nothing here.
            out.update({n: v for n, v in zip(names, vals, strict=False) if specmod.dtype_for_ctype(v)})
        for p in self.ir.pointer_params:
            if p.ctype in names and p.ctype not in out:
                a = self.arg_spec(p.name)
                if a is not None and a.dtype:
                    out[p.ctype] = DTYPE_CTYPE[a.dtype]
        return out

    def ctype(self, param: str) -> str:
        """The concrete element C type of a parameter (template parameters resolved where possible)."""
        p = self.ir.param(param)
        if p is None:
            return ""
        return self.template_map().get(p.ctype, p.ctype)

    def dtype(self, param: str) -> str | None:
        """The spec dtype (``f32``, ``f16``, ``u8``...) of a pointer parameter."""
        a = self.arg_spec(param)
        if a is not None and a.dtype:
            return a.dtype
        got = specmod.dtype_for_ctype(self.ctype(param))
        return got[0] if got else None

    def elem_bytes(self, param: str) -> int | None:
        d = self.dtype(param)
        if d is not None:
            return specmod.DTYPE_BYTES[d]
        return CTYPE_BYTES.get(self.ctype(param))

    def value_expr(self, param: str) -> str | None:
        """A spec expression for a scalar parameter's value (``"N"``) usable in a launch expression."""
        a = self.arg_spec(param)
        if a is None or a.value is None:
            return None
        return str(a.value)

    def direction(self, param: str) -> str | None:
        a = self.arg_spec(param)
        return a.dir if a is not None else None

    # -- launch ------------------------------------------------------------------------------------

    def launch(self) -> specmod.LaunchSpec | None:
        return self.spec.spec.launch if self.spec is not None and not self.host_launched else None

    @property
    def launch_model(self) -> KernelLaunch | None:
        """How the kernel is launched at every declared shape (the one launch model: spec or host launcher)."""
        return self.canon.launches.get(self.kernel.name) if self.canon is not None else None

    def block_threads(self) -> int | None:
        """Threads per block the kernel runs with (main shape), from the spec or the launch site."""
        lm = self.launch_model
        if lm is not None and lm.shapes and lm.complete:
            block = [lm.block_dim(a) or 0 for a in range(3)]
            if all(block):
                return block[0] * block[1] * block[2]
        if self.host_launched:
            if self.launch_site is None or len(self.launch_site.config) < 2:
                return None
            return host_int(self.model, self.launch_site, self.launch_site.config[1])
        launch = self.launch()
        if launch is None or self.spec is None:
            return None
        try:
            names = self.spec.spec.resolved_sizes()
            dims = specmod.launch_dims(launch, names)
        except exprs.ExprError:
            return None
        if isinstance(dims, str):
            return None
        b = dims[1]
        return b[0] * b[1] * b[2]

    def block_is_1d(self) -> bool:
        """Is the block one-dimensional (``blockDim.y == blockDim.z == 1``) for every shape?"""
        lm = self.launch_model
        if lm is not None and lm.shapes and lm.complete:
            return lm.block_dim(1) == 1 and lm.block_dim(2) == 1
        if self.host_launched:
            if self.launch_site is None or len(self.launch_site.config) < 2:
                return False
            return host_int(self.model, self.launch_site, self.launch_site.config[1]) is not None
        launch = self.launch()
        if launch is None:
            return False
        dims = launch.block_dims()
        return all(str(d).strip() == "1" for d in dims[1:])

    def grid_is_1d(self) -> bool:
        if self.host_launched:
            if self.launch_site is None or not self.launch_site.config:
                return False
            return (
                not re.search(r"\bdim3\b", self.launch_site.config[0])
                and "{" not in self.launch_site.config[0]
            )
        launch = self.launch()
        return launch is not None and all(str(d).strip() == "1" for d in launch.grid_dims()[1:])

    def main_param_values(self) -> dict[str, int] | None:
        """Integer scalar parameters' values at the spec's main shape (None: the spec gives no shape)."""
        shapes = self.shapes()
        if not shapes:
            return None
        out: dict[str, int] = {}
        for p in self.ir.params:
            v = None if p.is_pointer else self.value_expr(p.name)
            if v is None:
                continue
            try:
                val = exprs.evaluate(v, shapes[0])
            except exprs.ExprError:
                continue
            if isinstance(val, int) and not isinstance(val, bool):
                out[p.name] = val
        return out

    def shapes(self) -> list[dict[str, exprs.Value]]:
        """Resolved size names for every declared shape (main shape first); unresolvable ones skipped."""
        if self.spec is None:
            return []
        out = []
        for shape in self.spec.spec.all_shapes():
            try:
                out.append(self.spec.spec.resolved_sizes(shape))
            except exprs.ExprError:
                continue
        return out


# --------------------------------------------------------------------------------------------------
# Helpers for matching and code generation


def define_values(model: SourceModel) -> dict[str, exprs.Value]:
    """The file's ``#define`` constants that evaluate to an int (in order: later ones may use earlier ones)."""
    names: dict[str, exprs.Value] = {}
    for k, v in model.defines.items():
        try:
            val = exprs.evaluate(v.strip() or "x", names)
        except exprs.ExprError:
            continue
        if isinstance(val, int) and not isinstance(val, bool):
            names[k] = val
    return names


def host_int(model: SourceModel, site: LaunchSite, text: str) -> int | None:
    """Evaluate a launch-site expression to an int through ``#define``s and the caller's constant locals."""
    names = define_values(model)
    caller = model.function(site.caller) if site.caller else None
    ctext = model.text[caller.span.start_byte : caller.span.end_byte] if caller else ""
    for m in re.finditer(
        r"\b(?:const(?:expr)?\s+)?(?:int|unsigned|unsigned int|size_t|long|auto|constexpr int)\s+"
        r"([A-Za-z_]\w*)\s*=\s*([^;{}]+);",
        ctext,
    ):
        with_u = m.group(2).strip()
        try:
            val = exprs.evaluate(re.sub(r"(\d+)[uUlL]+\b", r"\1", with_u), names)
        except exprs.ExprError:
            continue
        if isinstance(val, int) and not isinstance(val, bool):
            names[m.group(1)] = val
    t = text.strip()
    dim = re.fullmatch(r"dim3\s*[({](.*)[)}]", t)
    if dim:
        parts = [p.strip() for p in dim.group(1).split(",")]
        if any(p not in ("1", "1u") for p in parts[1:]):
            return None
        t = parts[0]
    try:
        return exprs.evaluate_int(re.sub(r"(\d+)[uUlL]+\b", r"\1", t), names)
    except exprs.ExprError:
        return None


def signature_text(ctx: RecipeContext) -> str:
    """The kernel's definition up to (not including) its body: template line, qualifiers, signature."""
    fn = ctx.kernel
    outer = fn.outer_span or fn.span
    assert fn.body_span is not None
    data = ctx.model.text.encode("utf-8", errors="replace")
    return data[outer.start_byte : fn.body_span.start_byte].decode("utf-8", errors="replace").rstrip()


def indent(code: str, n: int) -> str:
    pad = " " * n
    return "\n".join((pad + line) if line.strip() else "" for line in code.split("\n"))


def c_ident(name: str) -> str:
    """A C identifier made from ``name`` (for generated locals that mention the user's names)."""
    return re.sub(r"\W", "_", name)


def is_float_ctype(ctype: str) -> bool:
    return ctype in ("float", "double", "__half", "half", "__nv_bfloat16", "nv_bfloat16")


def replace_nodes(ir: KernelIR, node: Any, replacements: dict[int, str]) -> str:
    """Text of ``node`` with the sub-nodes whose ids are keys replaced by their values."""
    data = ir.data
    start, end = node.start_byte, node.end_byte
    edits: list[tuple[int, int, str]] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n.id in replacements:
            edits.append((n.start_byte, n.end_byte, replacements[n.id]))
            continue
        stack.extend(n.children)
    out = data[start:end]
    for s, e, rep in sorted(edits, key=lambda t: t[0], reverse=True):
        out = out[: s - start] + rep.encode() + out[e - start :]
    return out.decode("utf-8", errors="replace")


def contexts_for(
    model: SourceModel, entry: str, spec: specmod.BoundSpec | None = None
) -> list[RecipeContext]:
    """One :class:`RecipeContext` per kernel a rewrite of ``entry`` may change (the entry or its launched kernels)."""
    from kernellsp.optimize.verify.scope import edit_targets

    fn = model.function(entry)
    if fn is None or not fn.has_body:
        return []
    bound = spec if spec is not None else specmod.entry_spec(model, entry)
    # Recipes match the normal form: the kernels after the canonicalisation passes (their text is
    # still CUDA; a recipe's code replaces the kernel in the original file).
    canon = canonicalize(model, entry, bound, kernels=edit_targets(model, entry))
    model = canon.model
    fn = model.function(entry) or fn
    out: list[RecipeContext] = []
    for name in edit_targets(model, entry):
        k = model.function(name)
        if k is None or not k.has_body:
            continue
        ir = kernel_ir(model, k)
        if ir is None:
            continue
        host = fn.kind != "global"
        site = None
        if host:
            callers = set(model.launchers(entry))
            sites = [s for s in model.launch_sites if s.kernel == name and s.caller in callers]
            site = sites[0] if len(sites) == 1 else None
        out.append(RecipeContext(model, entry, fn, k, ir, bound, host, site, canon))
    return out
