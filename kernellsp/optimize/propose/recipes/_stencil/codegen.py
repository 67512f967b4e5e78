"""Generation: the tiled kernel for one parameter point."""

from __future__ import annotations

import re

from kernellsp.optimize.propose.recipes._stencil.analysis import _bounds, _eval, _loop_ranges
from kernellsp.optimize.propose.recipes._stencil.model import MAX_REG_TAPS, TILE_BYTES, Filter, Stencil, Tiled
from kernellsp.optimize.propose.recipes.base import (
    CTYPE_BYTES,
    RecipeContext,
    RecipeError,
    replace_nodes,
    signature_text,
)
from kernellsp.source import exprs
from kernellsp.source.ir import THREAD_SYMBOLS, Poly, walk


class _Gen:
    def __init__(
        self,
        ctx: RecipeContext,
        st: Stencil,
        bx: int,
        by: int,
        vbx: int,
        vby: int,
        per: int,
        halo: tuple[int, int, int, int],
        specialise: bool,
        vec: bool = False,
    ) -> None:
        self.ctx, self.ir, self.st = ctx, ctx.ir, st
        self.bx, self.by, self.vbx, self.vby, self.per = bx, by, vbx, vby, per
        self.halo = halo
        self.specialise = specialise and bool(st.sizes)
        # 16-byte tile loads (1-D): the tile starts at the aligned element at or before the halo's first one.
        self.vec = (
            vec and st.dims == 1 and all(16 % t.elem_bytes == 0 and t.elem_bytes <= 8 for t in st.tiled)
        )
        self.twc = vbx + halo[0] + halo[1]
        if self.vec:
            self.twc += 2 * max(16 // t.elem_bytes for t in st.tiled)
        if st.dims == 2 and bx < 32 and 32 % bx == 0:
            # A warp spans 32 / bx tile rows: a row pitch of bx (mod 32) words puts them on disjoint banks
            # (a 16-wide block with pitch 22 read 2-way conflicted: slower than the naive kernel on an H100).
            self.twc += (bx - self.twc % 32) % 32
        self.thc = (vby + halo[2] + halo[3]) if st.dims == 2 else 1
        for t in st.tiled:
            if self.twc * self.thc * t.elem_bytes > TILE_BYTES // max(1, len(st.tiled)):
                raise RecipeError(
                    f"the tile of {t.array} ({self.twc}x{self.thc}) does not fit in shared memory"
                )

    def _rn(self, p: Poly, special: dict[str, int] | None = None) -> str:
        """C text of an offset polynomial (divmod atoms spelled out; specialised sizes as constants)."""
        text = p.c_text(self.st.atoms)
        for name, value in (special or {}).items():
            text = re.sub(rf"\b{re.escape(name)}\b", f"({value})", text)
        return text

    def _virtual(self) -> dict[int, str]:
        out: dict[int, str] = {}
        for n in walk(self.ir.body):
            if n.type != "field_expression":
                continue
            text = "".join(self.ir.text(n).split())
            if not text.startswith(("threadIdx.", "blockIdx.", "blockDim.")):
                continue
            kind, a = text.split(".")
            if a not in ("x", "y"):
                continue
            out[n.id] = {"threadIdx": f"kl_vt{a}", "blockIdx": f"blockIdx.{a}", "blockDim": f"kl_vb{a}"}[kind]
        return out

    def _halo_defs(self) -> str:
        lines = []
        for t in self.st.tiled:
            a = t.array
            for name, polys, neg in (
                (f"kl_hxl_{a}", t.min_x, True),
                (f"kl_hxr_{a}", t.max_x, False),
                (f"kl_hyl_{a}", t.min_y, True),
                (f"kl_hyr_{a}", t.max_y, False),
            ):
                if name.startswith("kl_hy") and self.st.dims == 1:
                    continue
                expr = "0"
                for p in polys:
                    v = f"(int)({'-' if neg else ''}({self._rn(p)}))"
                    expr = f"max({expr}, {v})"
                lines.append(f"const int {name} = {expr};")
            if self.vec:
                # Elements between the aligned start of the tile and the halo's first element (the same for
                # every block: blocks start a multiple of the vector's elements apart).
                ve = 16 // t.elem_bytes
                lines.append(f"const int kl_o_{a} = (int)((((long long)-kl_hxl_{a}) % {ve} + {ve}) % {ve});")
        return "\n".join(lines)

    def _fits(self) -> str:
        hx_lo, hx_hi, hy_lo, hy_hi = self.halo
        conds = []
        for t in self.st.tiled:
            a = t.array
            conds += [f"kl_hxl_{a} <= {hx_lo}", f"kl_hxr_{a} <= {hx_hi}"]
            if self.st.dims == 2:
                conds += [f"kl_hyl_{a} <= {hy_lo}", f"kl_hyr_{a} <= {hy_hi}"]
        return " && ".join(conds)

    def _load(self) -> str:
        out = []
        for t in self.st.tiled:
            a = t.array
            if self.st.dims == 2:
                assert t.pitch is not None
                out.append(
                    f"{{\n    const long long kl_c0 = (long long)blockIdx.x * {self.vbx} - kl_hxl_{a};\n"
                    f"    const long long kl_r0 = (long long)blockIdx.y * {self.vby} - kl_hyl_{a};\n"
                    f"    const int kl_tw = {self.vbx} + kl_hxl_{a} + kl_hxr_{a};\n"
                    f"    const int kl_th = {self.vby} + kl_hyl_{a} + kl_hyr_{a};\n"
                    f"    const long long kl_n = {t.count_c};\n"
                    "    // One pass over the tile's capacity rows, consecutive threads on consecutive columns (the\n"
                    "    // division is by a constant); columns past this launch's halo are skipped.\n"
                    f"    for (int kl_i = threadIdx.y * {self.bx} + threadIdx.x; kl_i < kl_th * {self.twc}; "
                    f"kl_i += {self.bx * self.by}) {{\n"
                    f"        const int kl_ty = kl_i / {self.twc}, kl_tx = kl_i - kl_ty * {self.twc};\n"
                    "        if (kl_tx >= kl_tw) continue;\n"
                    f"        const long long kl_g = (kl_r0 + kl_ty) * (long long)({self._rn(t.pitch)}) + kl_c0 + kl_tx;\n"
                    f"        kl_tile_{a}[kl_i] = (kl_g >= 0 && kl_g < kl_n) ? {a}[kl_g] : {t.ctype}();\n"
                    "    }\n}"
                )
            elif self.vec:
                out.append(self._load_vec(t))
            else:
                out.append(
                    f"{{\n    const long long kl_c0 = (long long)blockIdx.x * {self.vbx} - kl_hxl_{a};\n"
                    f"    const int kl_tw = {self.vbx} + kl_hxl_{a} + kl_hxr_{a};\n"
                    f"    const long long kl_n = {t.count_c};\n"
                    f"    for (int kl_tx = threadIdx.x; kl_tx < kl_tw; kl_tx += {self.bx}) {{\n"
                    "        const long long kl_g = kl_c0 + kl_tx;\n"
                    f"        kl_tile_{a}[kl_tx] = (kl_g >= 0 && kl_g < kl_n) ? {a}[kl_g] : {t.ctype}();\n"
                    "    }\n}"
                )
        return "\n".join(out)

    def _load_vec(self, t: Tiled) -> str:
        """A 1-D tile loaded with 16-byte vectors when the array is 16-byte aligned (scalar loads otherwise, and
        element by element where a vector would cross the array's ends)."""
        a, ve, bx = t.array, 16 // t.elem_bytes, self.bx
        return (
            f"{{\n    const long long kl_a0 = (long long)blockIdx.x * {self.vbx} - kl_hxl_{a} - kl_o_{a};\n"
            f"    const int kl_tw = {self.vbx} + kl_hxl_{a} + kl_hxr_{a} + kl_o_{a};\n"
            f"    const long long kl_n = {t.count_c};\n"
            f"    if ((reinterpret_cast<unsigned long long>({a}) & 15ull) == 0) {{\n"
            f"        for (int kl_q = threadIdx.x; kl_q * {ve} < kl_tw; kl_q += {bx}) {{\n"
            f"            const long long kl_g = kl_a0 + (long long)kl_q * {ve};\n"
            f"            if (kl_g >= 0 && kl_g + {ve} <= kl_n) {{\n"
            f"                const uint4* kl_src = reinterpret_cast<const uint4*>({a} + kl_g);\n"
            f"                uint4* kl_dst = reinterpret_cast<uint4*>(&kl_tile_{a}[kl_q * {ve}]);\n"
            "                kl_dst[0] = kl_src[0];\n"
            "            } else {\n"
            f"                for (int kl_e = 0; kl_e < {ve}; ++kl_e)\n"
            f"                    kl_tile_{a}[kl_q * {ve} + kl_e] = "
            f"(kl_g + kl_e >= 0 && kl_g + kl_e < kl_n) ? {a}[kl_g + kl_e] : {t.ctype}();\n"
            "            }\n        }\n    } else {\n"
            f"        for (int kl_tx = threadIdx.x; kl_tx < kl_tw; kl_tx += {bx}) {{\n"
            "            const long long kl_g = kl_a0 + kl_tx;\n"
            f"            kl_tile_{a}[kl_tx] = (kl_g >= 0 && kl_g < kl_n) ? {a}[kl_g] : {t.ctype}();\n"
            "        }\n    }\n}"
        )

    def _lambda(
        self, name: str, tiled: bool, special: dict[str, int] | None, decided: dict[int, str] | None = None
    ) -> str:
        rep = self._virtual()
        rep.update(decided or {})
        if tiled:
            for t in self.st.tiled:
                a = t.array
                for r in t.reads:
                    col = f"kl_vtx + ({self._rn(r.offx, special)}) + kl_hxl_{a}"
                    if self.st.dims == 2:
                        row = f"kl_vty + ({self._rn(r.offy, special)}) + kl_hyl_{a}"
                        rep[r.node.id] = f"kl_tile_{a}[({row}) * {self.twc} + {col}]"
                    elif self.vec:
                        rep[r.node.id] = f"kl_tile_{a}[{col} + kl_o_{a}]"
                    else:
                        rep[r.node.id] = f"kl_tile_{a}[{col}]"
        if special is not None:
            for n in walk(self.ir.body):
                if n.type == "identifier" and self.ir.text(n) in special and n.id not in rep:
                    parent = n.parent
                    if parent is not None and parent.type == "field_expression":
                        continue
                    rep[n.id] = f"{special[self.ir.text(n)]}"
                # A pragma needs a line of its own: only loops that are statements of a block get one
                # (nvcc unrolls the others anyway once their bounds are constants).
                stmt = n.parent
                if (
                    n.type == "for"
                    and stmt is not None
                    and stmt.type == "for_statement"
                    and stmt.parent is not None
                    and stmt.parent.type == "compound_statement"
                ):
                    rep[n.id] = "\n#pragma unroll\nfor"
            for f in self.regs:
                for node in f.nodes:
                    idx = node.child_by_field_name("indices")
                    inner = next((c for c in idx.named_children), None) if idx is not None else None
                    if inner is None:
                        continue
                    rep[node.id] = f"kl_w_{f.array}[{replace_nodes(self.ir, inner, rep)}]"
        body = replace_nodes(self.ir, self.ir.body, rep)
        params = "int kl_vtx" + (", int kl_vty" if self.st.dims == 2 else "")
        return f"auto {name} = [&]({params}) {body};\n"

    def _interior(self) -> tuple[dict[int, str], list[str]]:
        """Comparisons whose value is the same for every point of an interior block, and the test for such a block.

        A bounds test ``x + dx < width`` (or ``idx >= 0``, ``x == 0``...) over one point coordinate, loop
        variables with counted ranges and parameters has a range over the block's points; where that
        range decides it, the test becomes ``true``/``false`` in a lambda that runs only when the block
        passes the run-time conditions returned. Which value to expect is read at the spec's main shape
        for a block in the middle of the grid; comparisons that are not decided there stay as written.
        """
        ir, st = self.ir, self.st
        ranges = _loop_ranges(ir)
        values = self.ctx.main_param_values()
        if isinstance(ranges, str) or values is None:
            return {}, []
        extents = {"x": st.extent_x, "y": st.extent_y}
        sizes = {"x": self.vbx, "y": self.vby}
        decided: dict[int, str] = {}
        conds: list[str] = []
        for n in walk(ir.body):
            if n.type != "binary_expression":
                continue
            op = ir.text(n.child_by_field_name("operator"))
            if op not in ("<", "<=", ">", ">=", "==", "!="):
                continue
            a, b = (
                ir.poly(n.child_by_field_name("left"), divmod=True),
                ir.poly(n.child_by_field_name("right"), divmod=True),
            )
            if a is None or b is None:
                continue
            d = a - b if op in (">", ">=") else b - a
            axes = [ax for ax in "xy" if d.coeff(f"gid.{ax}").value in (1, -1)]
            if len(axes) != 1:
                continue
            ax = axes[0]
            sgn = d.coeff(f"gid.{ax}").value
            rest = d - Poly.sym(f"gid.{ax}") * sgn  # type: ignore[operator]
            if rest.depends_on(THREAD_SYMBOLS) or d.depends_on(
                {f"gid.{o}" for o in "xyz" if o != ax} | {"?"}
            ):
                continue
            bounds = _bounds(rest, ranges)
            ext = extents.get(ax)
            if isinstance(bounds, str) or ext is None:
                continue
            lo_r, hi_r = bounds
            v = sizes[ax]
            x0 = f"((long long)blockIdx.{ax} * {v})"
            lo_c = f"({x0} + ({self._rn(lo_r)}))" if sgn == 1 else f"(({self._rn(lo_r)}) - {x0} - {v - 1})"
            hi_c = f"({x0} + {v - 1} + ({self._rn(hi_r)}))" if sgn == 1 else f"(({self._rn(hi_r)}) - {x0})"
            strict = op in ("<", ">")
            # The block in the middle of the grid at the main shape says which value to expect.
            e_val, lo_v, hi_v = _eval(ir, ext, values), _eval(ir, lo_r, values), _eval(ir, hi_r, values)
            if e_val is None or lo_v is None or hi_v is None:
                continue
            xm = (e_val // 2) // v * v
            lo_d = xm + lo_v if sgn == 1 else lo_v - xm - (v - 1)
            hi_d = xm + v - 1 + hi_v if sgn == 1 else hi_v - xm
            if op in ("==", "!="):
                if lo_d > 0 or hi_d < 0:
                    decided[n.id] = "false" if op == "==" else "true"
                    conds.append(f"({lo_c} > 0 || {hi_c} < 0)")
                continue
            if (lo_d > 0) if strict else (lo_d >= 0):
                decided[n.id] = "true"
                conds.append(f"{lo_c} {'>' if strict else '>='} 0")
            elif (hi_d <= 0) if strict else (hi_d < 0):
                decided[n.id] = "false"
                conds.append(f"{hi_c} {'<=' if strict else '<'} 0")
        return decided, sorted(set(conds))

    def _calls(self, name: str) -> str:
        if self.st.dims == 2:
            return (
                f"#pragma unroll\nfor (int kl_s = 0; kl_s < {self.per}; ++kl_s) "
                f"{name}(threadIdx.x, threadIdx.y * {self.per} + kl_s);\n"
            )
        return f"#pragma unroll\nfor (int kl_s = 0; kl_s < {self.per}; ++kl_s) {name}(threadIdx.x + {self.bx} * kl_s);\n"

    @property
    def regs(self) -> list[Filter]:
        """Filters small enough (at the main shape) to live in registers in the specialised path."""
        values = self.ctx.main_param_values() or {}
        shapes = self.ctx.shapes()
        out = []
        for f in self.st.filters:
            if not f.count_spec or not shapes:
                continue
            try:
                n = exprs.evaluate(f.count_spec, shapes[0])
            except exprs.ExprError:
                continue
            if isinstance(n, int) and 0 < n <= MAX_REG_TAPS and f.ctype in CTYPE_BYTES:
                out.append(Filter(f.array, f.ctype, f.nodes, str(n)))
        del values
        return out

    def kernel(self) -> str:
        st = self.st
        align = "alignas(16) " if self.vec else ""
        tiles = "".join(
            f"    __shared__ {align}{t.ctype} kl_tile_{t.array}[{self.twc * self.thc}];\n" for t in st.tiled
        )
        vdefs = f"    const int kl_vbx = {self.vbx};\n" + (
            f"    const int kl_vby = {self.vby};\n" if st.dims == 2 else ""
        )
        if self.ctx.host_launched:
            vdefs = "    const int kl_vbx = blockDim.x;\n" + (
                "    const int kl_vby = blockDim.y;\n" if st.dims == 2 else ""
            )
        halos = _ind(self._halo_defs(), 4)
        fits = self._fits()
        plain = self._lambda("kl_point", False, None)
        decided, inner_conds = self._interior()
        tiled = self._lambda("kl_point_tiled", True, None)
        tiled_calls = self._calls("kl_point_tiled")
        if decided:
            # Interior blocks: the bounds tests the block's position decides are constants there.
            inner = self._lambda("kl_point_inner", True, None, decided)
            tiled_calls = (
                f"if ({' && '.join(inner_conds)}) {{\n"
                + _ind(inner + self._calls("kl_point_inner"), 4)
                + "\n} else {\n"
                + _ind(tiled_calls, 4)
                + "\n}\n"
            )
        special_block = ""
        values = self.ctx.main_param_values() or {}
        if self.specialise and all(s in values for s in st.sizes):
            special = {s: values[s] for s in st.sizes}
            cond = " && ".join(f"{s} == {v}" for s, v in special.items())
            regs = "".join(
                f"{f.ctype} kl_w_{f.array}[{f.count_spec}];\n#pragma unroll\nfor (int kl_i = 0; kl_i < "
                f"{f.count_spec}; ++kl_i) kl_w_{f.array}[kl_i] = {f.array}[kl_i];\n"
                for f in self.regs
            )
            lam = self._lambda("kl_point_fixed", True, special)
            calls = self._calls("kl_point_fixed")
            if decided:
                inner = self._lambda("kl_point_fixed_inner", True, special, decided)
                calls = (
                    f"if ({' && '.join(inner_conds)}) {{\n"
                    + _ind(inner + self._calls("kl_point_fixed_inner"), 4)
                    + "\n} else {\n"
                    + _ind(calls, 4)
                    + "\n}\n"
                )
            special_block = f"if ({cond}) {{\n" + _ind(regs + lam + calls, 4) + "\n} else "
        body = (
            f"{tiles}{vdefs}{halos}\n"
            f"    if ({fits}) {{\n"
            f"{_ind(self._load(), 8)}\n        __syncthreads();\n"
            f"{_ind(special_block + '{' + chr(10) + _ind(tiled + tiled_calls, 4) + chr(10) + '}', 8)}\n"
            "    } else {\n"
            f"{_ind(plain + self._calls('kl_point'), 8)}\n"
            "    }\n"
        )
        what = (
            (f"{self.per} point(s) per thread, " if self.per > 1 else "")
            + ("16-byte tile loads, " if self.vec else "")
            + ("filter sizes specialised for the spec's main shape" if special_block else "")
        )
        # The recipe module imports this one: its name is read when the kernel is written.
        from kernellsp.optimize.propose.recipes.stencil import NAME

        return (
            f"{signature_text(self.ctx)}\n{{\n"
            f"    // Tiled stencil (kernellsp recipe {NAME}): the block's points plus halo are staged in shared\n"
            f"    // memory; the user's per-point code runs in a lambda reading the tile; {what or 'one point per thread'}.\n"
            f"    // A halo larger than the tile (another filter size) takes the same code with global reads.\n"
            f"{body}}}\n"
        )


def _ind(text: str, n: int) -> str:
    pad = " " * n
    return "\n".join(pad + ln if ln.strip() else "" for ln in text.rstrip("\n").split("\n"))
