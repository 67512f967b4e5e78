"""Generation: the kernel for one parameter point and its all-reduce helpers."""

from __future__ import annotations

from kernellsp.optimize.propose.recipes import _memshape as ms
from kernellsp.optimize.propose.recipes._rowreduce.model import ColLoop, RowProgram, _acc_type, ms_ctype_bytes
from kernellsp.optimize.propose.recipes.base import (
    RecipeContext,
    RecipeError,
    replace_nodes,
    signature_text,
)
from kernellsp.source.ir import Accumulation, Poly, walk

_IDENTITY = {
    ("sum", "f"): "0.0f",
    ("sum", "d"): "0.0",
    ("sum", "i"): "0",
    ("prod", "f"): "1.0f",
    ("prod", "d"): "1.0",
    ("prod", "i"): "1",
    ("max", "f"): "-__int_as_float(0x7f800000)",
    ("max", "d"): "-__longlong_as_double(0x7ff0000000000000LL)",
    ("min", "f"): "__int_as_float(0x7f800000)",
    ("min", "d"): "__longlong_as_double(0x7ff0000000000000LL)",
    ("and", "i"): "~0",
    ("or", "i"): "0",
    ("xor", "i"): "0",
}


_INT_LIMITS = {
    "int": ("(-2147483647 - 1)", "2147483647"),
    "long long": ("(-9223372036854775807LL - 1)", "9223372036854775807LL"),
    "unsigned int": ("0u", "0xffffffffu"),
    "unsigned long long": ("0ull", "0xffffffffffffffffull"),
}


_TYPES = {
    "float": "f",
    "double": "d",
    "int": "i",
    "unsigned": "i",
    "unsigned int": "i",
    "long long": "i",
    "unsigned long long": "i",
    "int32_t": "i",
    "uint32_t": "i",
    "int64_t": "i",
    "uint64_t": "i",
    "size_t": "i",
    "long": "i",
    "unsigned long": "i",
}


class _Gen:
    """Writes the kernel for one parameter point."""

    def __init__(self, ctx: RecipeContext, prog: RowProgram, layout: str, tpr: int, velems: int, slots: int):
        self.ctx, self.ir, self.prog = ctx, ctx.ir, prog
        self.layout, self.tpr, self.velems, self.slots = layout, tpr, velems, slots
        self.needed: set[tuple[str, str]] = set()

    # -- pieces -------------------------------------------------------------------------------------
    def helpers(self) -> str:
        return "\n".join(_helper_code(op, t, self.layout == "block") for op, t in sorted(self.needed))

    def _virtual(self) -> dict[int, str]:
        """Builtins of the row mapping -> the lambda's virtual thread coordinates; other axes -> 0/1."""
        out: dict[int, str] = {}
        ax = self.prog.axis
        for n in walk(self.ir.body):
            if n.type != "field_expression":
                continue
            text = "".join(self.ir.text(n).split())
            if not text.startswith(("threadIdx.", "blockIdx.", "blockDim.")):
                continue
            kind, a = text.split(".")
            if a == ax:
                out[n.id] = {"threadIdx": "kl_vtid", "blockIdx": "kl_vbid", "blockDim": "kl_vbdim"}[kind]
            else:
                out[n.id] = "1" if kind == "blockDim" else "0"
        return out

    def _common(self) -> dict[int, str]:
        rep = self._virtual()
        for lit in self.prog.float_literals:
            rep[lit.id] = self.ir.text(lit) + "f"
        for t in self.prog.trees:
            for r in t.reads:
                rep[r.id] = t.acc
        for d in self.prog.delete:
            rep[d.id] = ""
        return rep

    def _acc_combine(self, acc: Accumulation) -> tuple[str, str]:
        """(code before the loop, code after it) for one accumulator."""
        t = _acc_type(self.ir, acc.var)
        assert t is not None
        kind = _TYPES.get(t, "i")
        ident = _IDENTITY.get((acc.op, kind))
        if kind == "i" and acc.op in ("max", "min"):
            lo, hi = _INT_LIMITS[t]
            ident = lo if acc.op == "max" else hi
        if ident is None:
            raise RecipeError(f"no identity for {acc.op} over {t}")
        init = f"kl_init_{acc.var}"
        before = f"const {t} {init} = {acc.var};\n{acc.var} = ({t})({ident});\n"
        level = "warp" if self.layout == "warp" else "block"
        self.needed.add((acc.op, t))
        after = (
            f"{{\n    const {t} kl_all = {_helper_name(level, acc.op, t)}({acc.var});\n"
            f"    {acc.var} = {_OPS[acc.op].format(a=init, b='kl_all')};\n}}\n"
        )
        return before, after

    def _loop(self, c: ColLoop, mode: str, common: dict[int, str]) -> str:
        assert c.loop.body is not None
        rep = dict(common)
        if mode == "cached":
            for arr, (_, _, nodes) in self.prog.rows_in.items():
                for n in nodes:
                    rep[n.id] = f"kl_row_{arr}[kl_s * {self.velems} + kl_v]"
        body = _dedent(replace_nodes(self.ir, c.loop.body, rep))
        start = c.start.c_text(_rename(self.prog))
        length = self.prog.length.c_text(_rename(self.prog))
        vt = " ".join(w for w in c.var_type.split() if w != "const") or "int"
        skip = "" if c.start == Poly() else f"if ({c.var} < ({start})) continue;\n"
        if mode == "cached":
            inner = (
                f"#pragma unroll\nfor (int kl_s = 0; kl_s < {self.slots}; ++kl_s) {{\n"
                f"    #pragma unroll\n    for (int kl_v = 0; kl_v < {self.velems}; ++kl_v) {{\n"
                f"        const {vt} {c.var} = ({vt})(kl_s * {self.tpr * self.velems} + kl_lane * {self.velems} + kl_v);\n"
                f"        if ({c.var} >= ({length})) continue;\n"
                + _indent(skip, 8)
                + _indent(body, 8)
                + "\n    }\n}\n"
            )
        else:
            inner = (
                f"for ({vt} {c.var} = ({vt})kl_lane; {c.var} < ({length}); {c.var} += {self.tpr}) {{\n"
                + _indent(skip, 4)
                + _indent(body, 4)
                + "\n}\n"
            )
        before = after = ""
        for acc in c.accs:
            b, a = self._acc_combine(acc)
            before += b
            after += a
        return "{\n" + _indent(before + inner + after, 4) + "}"

    def _fill(self) -> str:
        """Load each cached input row into registers (16-byte vectors when aligned)."""
        out = []
        length = self.prog.length.c_text(_rename(self.prog))
        for arr, (base, ctype, _) in self.prog.rows_in.items():
            size = ms_ctype_bytes()[ctype]
            vbytes = size * self.velems
            vtype = {16: "uint4", 8: "uint2", 4: "unsigned int"}.get(vbytes)
            base_c = ms.wide(base, _rename(self.prog))
            out.append(f"{ctype} kl_row_{arr}[{self.slots * self.velems}];")
            out.append(f"const {ctype}* kl_src_{arr} = {arr} + ({base_c});")
            vec_load = ""
            if vtype is not None and self.velems > 1:
                out.append(
                    f"const bool kl_al_{arr} = (reinterpret_cast<unsigned long long>(kl_src_{arr}) & {vbytes - 1}) == 0;"
                )
                vec_load = (
                    f"    if (kl_al_{arr} && kl_j0 + {self.velems} <= (long long)({length})) {{\n"
                    f"        const {vtype} kl_pk = __ldg(reinterpret_cast<const {vtype}*>(kl_src_{arr} + kl_j0));\n"
                    f"        memcpy(&kl_row_{arr}[kl_s * {self.velems}], &kl_pk, {vbytes});\n"
                    "        continue;\n    }\n"
                )
            out.append(
                f"#pragma unroll\nfor (int kl_s = 0; kl_s < {self.slots}; ++kl_s) {{\n"
                f"    const long long kl_j0 = (long long)kl_s * {self.tpr * self.velems} + kl_lane * {self.velems};\n"
                + vec_load
                + f"    #pragma unroll\n    for (int kl_v = 0; kl_v < {self.velems}; ++kl_v) {{\n"
                f"        kl_row_{arr}[kl_s * {self.velems} + kl_v] = kl_j0 + kl_v < (long long)({length}) ? "
                f"kl_src_{arr}[kl_j0 + kl_v] : {ctype}();\n    }}\n}}"
            )
        return "\n".join(out) + "\n"

    def _row_body(self) -> str:
        """The user's body with the loops re-dealt (and, when rows fit, a cached and a streaming variant)."""
        ir, prog = self.ir, self.prog
        common = self._common()
        stmts = [s for s in prog.container.named_children if s.type != "comment"]
        first = next(i for i, s in enumerate(stmts) if s == prog.loops[0].loop.node)
        rest = stmts[first:]
        loop_ids = {c.loop.node.id: c for c in prog.loops}

        def render(mode: str) -> str:
            rep = dict(common)
            for c in prog.loops:
                rep[c.loop.node.id] = self._loop(c, mode, common)
            parts = []
            for s in rest:
                if s.id in rep:
                    parts.append(rep[s.id])
                else:
                    parts.append(_dedent(replace_nodes(ir, s, rep)))
            return "\n".join(p for p in parts if p.strip())

        del loop_ids
        if self.slots:
            length = prog.length.c_text(_rename(prog))
            cap = self.slots * self.tpr * self.velems
            dispatch = (
                f"if ((long long)({length}) <= {cap}) {{\n"
                + _indent(self._fill() + render("cached"), 4)
                + "\n} else {\n"
                + _indent(render("stream"), 4)
                + "\n}"
            )
        else:
            dispatch = render("stream")
        rep = dict(common)
        rep[rest[0].id] = dispatch
        for s in rest[1:]:
            rep[s.id] = ""
        return _dedent(replace_nodes(ir, ir.body, rep))

    def kernel(self, threads: int) -> str:
        prog = self.prog
        body = self._row_body()
        lb = (
            ""
            if self.ctx.kernel.launch_bounds or self.ctx.host_launched
            else f"__launch_bounds__({threads}) "
        )
        sig = signature_text(self.ctx)
        if lb:
            sig = sig.replace("__global__", f"__global__ {lb.strip()}", 1)
        if self.layout == "warp":
            if self.ctx.host_launched:
                driver = (
                    "    // Each warp runs the rows of its 32 lanes' original threads, one after the other.\n"
                    "    for (int kl_k = 0; kl_k < 32; ++kl_k) {\n"
                    "        kl_row_program((long long)(threadIdx.x >> 5) * 32 + kl_k, (long long)blockIdx.x, "
                    "(long long)blockDim.x);\n    }\n"
                )
            elif prog.form == "thread":
                driver = f"    kl_row_program((long long)(threadIdx.x >> 5), (long long)blockIdx.x, {threads // 32}LL);\n"
            else:
                driver = f"    kl_row_program(0LL, (long long)blockIdx.x * {threads // 32} + (threadIdx.x >> 5), 1LL);\n"
            lane = "    const int kl_lane = threadIdx.x & 31;\n"
        else:
            driver = "    kl_row_program(0LL, (long long)blockIdx.x, 1LL);\n"
            lane = "    const int kl_lane = threadIdx.x;\n"
        what = ("a warp per row" if self.layout == "warp" else f"a block of {threads} threads per row") + (
            f", the row kept in registers ({self.slots} x {self.velems} elements per thread) when it fits"
            if self.slots
            else ""
        )
        # The recipe module imports this one: its name is read when the kernel is written.
        from kernellsp.optimize.propose.recipes.rowreduce import NAME

        return (
            f"{sig}\n{{\n    // Row-wise rewrite (kernellsp recipe {NAME}): {what}; every reduction loop ends in a\n"
            "    // butterfly all-reduce with its own operator. The user's statements run inside kl_row_program\n"
            "    // with the row's thread coordinates re-mapped (kl_vtid/kl_vbid/kl_vbdim).\n"
            f"{lane}"
            "    auto kl_row_program = [&](long long kl_vtid, long long kl_vbid, long long kl_vbdim) {\n"
            f"{_indent(body, 8)}\n    }};\n{driver}}}\n"
        )


def _rename(prog: RowProgram) -> dict[str, str]:
    ax = prog.axis
    return {
        f"gid.{ax}": "(kl_vbid * kl_vbdim + kl_vtid)",
        f"blockIdx.{ax}": "kl_vbid",
        f"threadIdx.{ax}": "kl_vtid",
        f"blockDim.{ax}": "kl_vbdim",
    }


def _dedent(text: str) -> str:
    """Text of a node cut from the source: its first line has no indentation, the others the source's."""
    lines = text.split("\n")
    rest = [ln for ln in lines[1:] if ln.strip()]
    cut = min((len(ln) - len(ln.lstrip()) for ln in rest), default=0)
    last = lines[-1].strip()
    if len(lines) > 1 and last in ("}", "};"):
        cut = min(cut, len(lines[-1]) - len(lines[-1].lstrip()))
    return "\n".join([lines[0]] + [ln[cut:] if ln.strip() else "" for ln in lines[1:]])


def _indent(text: str, n: int) -> str:
    pad = " " * n
    return "\n".join(pad + line if line.strip() else "" for line in text.rstrip("\n").split("\n"))


_OPS = {
    "sum": "{a} + {b}",
    "prod": "{a} * {b}",
    "max": "({b} > {a} ? {b} : {a})",
    "min": "({b} < {a} ? {b} : {a})",
    "and": "{a} & {b}",
    "or": "{a} | {b}",
    "xor": "{a} ^ {b}",
}


def _helper_name(level: str, op: str, t: str) -> str:
    return f"kl_{level}_{op}_{t.replace(' ', '_')}"


def _helper_code(op: str, t: str, block: bool) -> str:
    """``__device__`` all-reduce helpers for one operator and type (warp butterfly; block through shared)."""
    e = _OPS[op]
    warp = _helper_name("warp", op, t)
    out = (
        f"// Every lane of the warp gets the {op} over the warp (butterfly: no broadcast needed).\n"
        f"__device__ __forceinline__ {t} {warp}({t} v)\n{{\n    #pragma unroll\n"
        f"    for (int o = 16; o > 0; o >>= 1) {{\n        const {t} w = __shfl_xor_sync(0xffffffffu, v, o);\n"
        f"        v = {e.format(a='v', b='w')};\n    }}\n    return v;\n}}\n"
    )
    if block:
        out += (
            f"\n// Every thread of the block gets the {op} over the block: one partial per warp in shared memory.\n"
            f"__device__ __forceinline__ {t} {_helper_name('block', op, t)}({t} v)\n{{\n"
            f"    __shared__ {t} kl_part[32];\n    v = {warp}(v);\n"
            "    __syncthreads();  // the previous reduction's reads of kl_part are done\n"
            "    if ((threadIdx.x & 31) == 0) kl_part[threadIdx.x >> 5] = v;\n    __syncthreads();\n"
            "    v = kl_part[0];\n"
            "    for (int i = 1; i < (int)((blockDim.x + 31) >> 5); ++i) {\n"
            f"        const {t} w = kl_part[i];\n        v = {e.format(a='v', b='w')};\n    }}\n"
            "    return v;\n}\n"
        )
    return out
