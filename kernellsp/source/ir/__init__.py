"""A small kernel IR: what a kernel computes per thread, in terms recipes can match on.

Built from the tree-sitter source model (:mod:`kernellsp.source.model`), one :class:`KernelIR` per
kernel definition, it records

* **index mapping**: every local variable whose value depends on ``threadIdx``/``blockIdx``, as a
  polynomial in thread symbols, loop variables and parameters (:class:`Poly`). The global thread
  index ``blockIdx.a*blockDim.a + threadIdx.a`` folds into one symbol ``gid.a`` whatever its
  spelling (either order, intermediate locals, casts, ``__umul24``, ``int``/``unsigned``/``size_t``/
  ``long``/``const`` declarations); :attr:`KernelIR.gid_vars` names the locals equal to it;
* **guards** (:class:`Guard`): ``if (i < n) {...}``, ``if (i >= n) return;`` (stored as the condition
  under which the code after it runs, here ``i < n``), ``break``/``continue`` exits, ``&&``/``?:``
  operands; each condition split into comparable conjuncts (:class:`Cond`);
* **loops** (:class:`Loop`): variable, start, bound conjuncts, step; grid-stride loops flagged;
* **global accesses** (:class:`Access`): every load, store, read-modify-write and atomic target of a
  pointer parameter (through local pointers ``p = x + off`` and ``&x[i]`` too), its index as a
  :class:`Poly` when the index is a polynomial (e.g. ``row*N + col``), the loops and guards around it;
  ``__shared__`` and local arrays are recorded with ``space`` set accordingly;
* **accumulations** (:class:`Accumulation`): ``acc += v``, ``acc = acc + v``, ``acc = fmaxf(acc, v)``,
  ``acc = v > acc ? v : acc``, ``if (v > best) { best = v; arg = i; }`` (an argmax);
* **atomics** (:class:`Atomic`): ``atomicAdd/Max/Min/...`` with their target access and value.

Why a hand-written polynomial rather than sympy: the IR is built on every ``kernellsp check`` of
every kernel, so it must cost microseconds, not sympy's ~0.5 s import; and the only algebra needed
is +, -, * and constant shifts on integer polynomials, plus "which monomials contain these symbols"
(affine in the thread/loop symbols with coefficients that are products of parameters). That is a
dict from monomials to integers; :meth:`Poly.split` returns the affine view.

Example (``samples/saxpy_strided.cu``)::

    ir = kernel_ir(model, "saxpy_strided")
    ir.gid_vars                       # {'t': 'x'}          (int t = blockIdx.x * blockDim.x + threadIdx.x)
    str(ir.loops[0])                  # 'for k = 0; k < chunk; k += 1'
    st = ir.stores()[0]               # st.base == 'y', st.kind == 'store'
    st.index                          # Poly(chunk*gid.x + k)  (int i = start + k; y[i] = ...)
    st.index.split(["gid.x", "k"])    # ({'gid.x': Poly(chunk), 'k': Poly(1)}, Poly(0))
    [str(c) for g in st.guards for c in g.conds]   # ['chunk*gid.x + k < n']
    st.guards[0].conds[0].bounds_above(st.index)   # Poly(n): the element bound

Recipes reach the IR through ``RecipeContext.ir`` (``kernellsp.optimize.propose.recipes.base``);
``ir.text(node)`` gives any node's source, ``ir.poly(node)`` any expression as a polynomial.

Everything is best effort over partial code: what cannot be analysed is ``None`` (an index that is
not a polynomial) or simply absent, never an exception; recipes decline when what they need is
missing. :func:`kernel_ir` caches per model, so recipes, explain and the rules share one build.
"""

from __future__ import annotations

from kernellsp.source.ir.control import conjuncts
from kernellsp.source.ir.expressions import signed_ctype, walk
from kernellsp.source.ir.kernel import KernelIR, kernel_ir
from kernellsp.source.ir.poly import AXES, BUILTINS, THREAD_SYMBOLS, Mono, Poly, fold_gid
from kernellsp.source.ir.records import (
    Access,
    Accumulation,
    Atomic,
    Cond,
    Guard,
    LocalVar,
    Loop,
    Node,
    ParamInfo,
)

__all__ = [
    "AXES",
    "BUILTINS",
    "THREAD_SYMBOLS",
    "Access",
    "Accumulation",
    "Atomic",
    "Cond",
    "Guard",
    "KernelIR",
    "LocalVar",
    "Loop",
    "Mono",
    "Node",
    "ParamInfo",
    "Poly",
    "conjuncts",
    "fold_gid",
    "kernel_ir",
    "signed_ctype",
    "walk",
]
