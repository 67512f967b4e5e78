"""``collectives``: barriers, group queries and shared memory in one spelling each.

* Barriers: ``block.sync()``, ``cg::sync(block)``, ``cg::this_thread_block().sync()``,
  ``__barrier_sync(0)`` and ``asm volatile("bar.sync 0;")`` become ``__syncthreads()``; a 32-wide
  tile's ``tile.sync()`` becomes ``__syncwarp()``.
* Cooperative-groups queries become builtins: ``block.thread_rank()`` is ``threadIdx.x`` for a 1-D
  block (the linear rank otherwise), ``block.size()`` ``blockDim.x``, ``block.group_index().x``
  ``blockIdx.x``; a 1-D grid's ``grid.thread_rank()`` is the global index; a 32-wide tile's
  ``thread_rank()`` is the lane, ``meta_group_rank()`` the warp, its ``shfl_*``/``any``/``all``/
  ``ballot`` the ``__*_sync`` intrinsics with the full mask. Group variables left without uses go.
* Shared memory: ``T* s = SharedMemory<T>();`` or ``T* s = obj.getPointer();`` (a helper or a helper
  object's method returning an ``extern __shared__`` array; ``volatile`` kept)
  and ``extern __shared__ char raw[]; float* s = (float*)raw;`` become ``extern __shared__ T s[];``;
  a file-scope ``__shared__`` array the kernel uses is declared in the kernel.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from kernellsp.source.ir.canon.unit import Change, Unit, identifier_uses, statements, walk

if TYPE_CHECKING:
    from tree_sitter import Node

NAME = "collectives"
SUMMARY = "cooperative-groups barriers/queries, asm barriers and shared memory behind helpers or casts in one spelling"

_CG = r"(?:(?:cg|cooperative_groups)::)?"
_BLOCK_DECL = re.compile(
    rf"^(?:const\s+)?(?:{_CG}thread_block|{_CG}thread_group|auto)\s*&?\s*(\w+)\s*=\s*{_CG}this_thread_block\s*\(\s*\)\s*;$"
)
_GRID_DECL = re.compile(
    rf"^(?:const\s+)?(?:{_CG}grid_group|auto)\s*&?\s*(\w+)\s*=\s*{_CG}this_grid\s*\(\s*\)\s*;$"
)
_TILE_DECL = re.compile(
    rf"^(?:const\s+)?(?:{_CG}thread_block_tile\s*<\s*(\d+)\s*>|auto)\s*&?\s*(\w+)\s*=\s*"
    rf"{_CG}tiled_partition\s*<\s*(\d+)\s*>\s*\(\s*[\w:().]+\s*\)\s*;$"
)
_ASM_BAR = re.compile(
    r'^asm\s*(?:volatile|__volatile__)?\s*\(\s*"\s*bar(?:\.sync|rier\.sync)\s+0\s*;?\s*"\s*(?::[^;]*)?\)\s*;$'
)
_FULL = "0xffffffff"


def run(unit: Unit) -> Change | None:
    change = Change()
    groups = _groups(unit)
    claimed: set[int] = set()
    for n in walk(unit.body):
        if n.start_byte in claimed:
            continue
        if n.type == "expression_statement":
            text = re.sub(r"\s+", " ", unit.text(n)).strip()
            if _ASM_BAR.match(text) or re.match(r"^__barrier_sync\s*\(\s*0\s*\)\s*;$", text):
                change.replace(n, "__syncthreads();")
                change.notes.append(f"`{text}` -> __syncthreads()")
                claimed.add(n.start_byte)
                continue
        if n.type == "call_expression":
            rep = _call(unit, n, groups)
            if rep is not None:
                change.replace(n, rep)
                change.notes.append(f"`{unit.text(n)}` -> {rep}")
                for c in walk(n):
                    claimed.add(c.start_byte)
    _drop_unused_groups(unit, groups, change)
    _shared_memory(unit, change)
    return change


def _groups(unit: Unit) -> dict[str, tuple[str, int, Node]]:
    """Group variables: name -> (kind ``block``/``grid``/``tile``, tile width, declaring statement)."""
    out: dict[str, tuple[str, int, Node]] = {}
    for st in walk(unit.body):
        if st.type not in ("declaration", "expression_statement"):
            continue
        text = re.sub(r"\s+", " ", unit.text(st)).strip()
        if m := _BLOCK_DECL.match(text):
            out[m.group(1)] = ("block", 0, st)
        elif m := _GRID_DECL.match(text):
            out[m.group(1)] = ("grid", 0, st)
        elif m := _TILE_DECL.match(text):
            out[m.group(2)] = ("tile", int(m.group(3)), st)
    return out


def _block_rank(unit: Unit) -> str:
    if unit.block_is_1d():
        return "threadIdx.x"
    return "(threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y)"


def _block_size(unit: Unit) -> str:
    return "blockDim.x" if unit.block_is_1d() else "(blockDim.x * blockDim.y * blockDim.z)"


def _call(unit: Unit, n: Node, groups: dict[str, tuple[str, int, Node]]) -> str | None:
    f = n.child_by_field_name("function")
    args_node = n.child_by_field_name("arguments")
    args = [unit.text(c) for c in args_node.named_children] if args_node is not None else []
    ftext = re.sub(r"\s+", "", unit.text(f))
    if re.fullmatch(rf"{_CG}sync", ftext) and len(args) == 1 and groups.get(args[0], ("",))[0] == "block":
        return "__syncthreads()"
    if re.fullmatch(rf"{_CG}this_thread_block\(\)\.sync", ftext):
        return "__syncthreads()"
    if f is None or f.type != "field_expression":
        return None
    obj = unit.text(f.child_by_field_name("argument"))
    method = unit.text(f.child_by_field_name("field"))
    kind, width = groups[obj][:2] if obj in groups else ("", 0)
    if kind == "block":
        return _block_call(unit, method, args)
    if kind == "grid":
        if not (unit.block_is_1d() and unit.grid_is_1d()):
            return None
        return {
            "thread_rank": "(blockIdx.x * blockDim.x + threadIdx.x)",
            "size": "(gridDim.x * blockDim.x)",
            "num_threads": "(gridDim.x * blockDim.x)",
        }.get(method)
    if kind == "tile" and width == 32 and unit.block_is_1d():
        return _tile_call(method, args)
    return None


def _block_call(unit: Unit, method: str, args: list[str]) -> str | None:
    if method == "sync" and not args:
        return "__syncthreads()"
    if method == "thread_rank":
        return _block_rank(unit)
    if method in ("size", "num_threads"):
        return _block_size(unit)
    return None


def _tile_call(method: str, args: list[str]) -> str | None:
    if method == "sync":
        return "__syncwarp()"
    if method == "thread_rank":
        return "(threadIdx.x % 32)"
    if method == "meta_group_rank":
        return "(threadIdx.x / 32)"
    if method in ("size", "num_threads"):
        return "32"
    intrinsic = {
        "shfl_down": "__shfl_down_sync",
        "shfl_up": "__shfl_up_sync",
        "shfl_xor": "__shfl_xor_sync",
        "shfl": "__shfl_sync",
        "any": "__any_sync",
        "all": "__all_sync",
        "ballot": "__ballot_sync",
    }.get(method)
    if intrinsic is None:
        return None
    return f"{intrinsic}({', '.join([_FULL, *args])})"


def _drop_unused_groups(unit: Unit, groups: dict[str, tuple[str, int, Node]], change: Change) -> None:
    """A group variable whose every use this pass rewrote (or that had none) is declared no more."""
    rewritten = [(e.start, e.end) for e in change.edits]
    for name, (_kind, _w, st) in groups.items():
        uses = [
            u
            for u in identifier_uses(unit, unit.body, name)
            if not (st.start_byte <= u.start_byte < st.end_byte)
        ]
        if all(any(s <= u.start_byte < e for s, e in rewritten) for u in uses):
            if any(s <= st.start_byte < e for s, e in rewritten):
                continue
            change.delete(unit.data, st)
            change.notes.append(f"group `{name}` no longer needed")


_SMEM_HELPER_CALL = re.compile(
    r"^(?:const\s+)?([\w:]+(?:\s*<[^;]*?>)?)\s*\*\s*(\w+)\s*=\s*(?:\(\s*[\w:<>\s]+\*\s*\)\s*)?(\w+)(?:\s*<[^;()]*>)?\s*\(\s*\)\s*(?:\.\s*\w+\s*\(\s*\))?\s*;$"
)
_SMEM_CAST = re.compile(
    r"^(?:const\s+)?([\w:]+)\s*\*\s*(\w+)\s*=\s*(?:\(\s*(?:const\s+)?\1\s*\*\s*\)|reinterpret_cast\s*<\s*(?:const\s+)?\1\s*\*\s*>)\s*\(?\s*(\w+)\s*\)?\s*;$"
)
#: ``volatile T* s = shared.getPointer();`` with ``SharedMem<T> shared;`` declared before it.
_SMEM_METHOD_CALL = re.compile(
    r"^(volatile\s+)?(?:const\s+)?([\w:]+)\s*(volatile\s*)?\*\s*(\w+)\s*=\s*(\w+)\s*\.\s*(\w+)\s*\(\s*\)\s*;$"
)
_EXTERN_SHARED = re.compile(
    r"^extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s*)?([\w:]+)\s+(\w+)\s*\[\s*\]\s*;$"
)


def _shared_memory(unit: Unit, change: Change) -> None:
    stmts = statements(unit.body)
    rewritten = [(e.start, e.end) for e in change.edits]
    smem_helpers = _smem_helpers(unit)
    externs: dict[str, tuple[str, Node]] = {}
    for st in stmts:
        text = re.sub(r"\s+", " ", unit.text(st)).strip()
        if m := _EXTERN_SHARED.match(text):
            externs[m.group(2)] = (m.group(1), st)
    for st in stmts:
        if any(s <= st.start_byte < e for s, e in rewritten):
            continue
        text = re.sub(r"\s+", " ", unit.text(st)).strip()
        m = _SMEM_HELPER_CALL.match(text)
        if m and m.group(3) in smem_helpers:
            change.replace(st, f"extern __shared__ {m.group(1)} {m.group(2)}[];")
            change.notes.append(f"`{m.group(2)}` = {m.group(3)}() is the block's dynamic shared memory")
            continue
        m = _SMEM_METHOD_CALL.match(text)
        if m and m.group(6) in smem_helpers:
            obj = _smem_object(unit, stmts, m.group(5), smem_helpers)
            if obj is not None:
                qual = "volatile " if (m.group(1) or m.group(3)) else ""
                change.replace(st, f"extern __shared__ {qual}{m.group(2)} {m.group(4)}[];")
                change.delete(unit.data, obj)
                change.notes.append(
                    f"`{m.group(4)}` = {m.group(5)}.{m.group(6)}() is the block's dynamic shared memory"
                )
                continue
        m = _SMEM_CAST.match(text)
        if m and m.group(3) in externs:
            raw = m.group(3)
            uses = [u for u in identifier_uses(unit, unit.body, raw) if not _inside(u, externs[raw][1])]
            if len(uses) == 1 and _inside(uses[0], st):
                change.replace(st, f"extern __shared__ {m.group(1)} {m.group(2)}[];")
                change.delete(unit.data, externs[raw][1])
                change.notes.append(
                    f"`{m.group(2)}` is the block's dynamic shared memory (was a cast of `{raw}`)"
                )
    _file_scope_shared(unit, change)


def _smem_object(unit: Unit, stmts: list[Node], name: str, smem_helpers: set[str]) -> Node | None:
    """The declaration ``Helper<T> name;`` of a shared-memory helper object used once (by the call)."""
    for st in stmts:
        text = re.sub(r"\s+", " ", unit.text(st)).strip()
        m = re.match(r"^([\w:]+)\s*(?:<[^;]*>)?\s+(\w+)\s*;$", text)
        if m and m.group(2) == name and m.group(1).split("::")[-1] in smem_helpers:
            others = [u for u in identifier_uses(unit, unit.body, name) if not _inside(u, st)]
            return st if len(others) == 1 else None
    return None


def _inside(n: Node, st: Node) -> bool:
    return st.start_byte <= n.start_byte and n.end_byte <= st.end_byte


def _smem_helpers(unit: Unit) -> set[str]:
    """Functions and structs of the file whose body declares ``extern __shared__`` (the SharedMemory<T> idiom)."""
    out: set[str] = set()
    if unit.model.tree is None:
        return out
    for n in walk(unit.model.tree.root_node):
        if n.type in ("struct_specifier", "class_specifier", "function_definition"):
            body = n.child_by_field_name("body")
            if body is None or "extern __shared__" not in re.sub(r"\s+", " ", unit.text(body)):
                continue
            name = n.child_by_field_name("name")
            if name is None and n.type == "function_definition":
                d = n.child_by_field_name("declarator")
                while d is not None and d.type != "function_declarator":
                    d = d.child_by_field_name("declarator")
                name = d.child_by_field_name("declarator") if d is not None else None
            if name is not None:
                out.add(unit.text(name).split("::")[-1])
    return out


def _file_scope_shared(unit: Unit, change: Change) -> None:
    """File-scope ``__shared__`` arrays the kernel uses are declared at the top of the kernel (same storage per block)."""
    if unit.model.tree is None:
        return
    own = {unit.text(n) for n in walk(unit.body) if n.type == "identifier"}
    decls = []
    for n in unit.model.tree.root_node.named_children:
        if n.type != "declaration":
            continue
        text = re.sub(r"\s+", " ", unit.text(n)).strip()
        if "__shared__" not in text or "=" in text:
            continue
        names = [unit.text(c) for c in walk(n) if c.type == "identifier"]
        if (
            names
            and names[0] in own
            and not any(
                d.type == "declaration" and names[0] in unit.text(d) and "__shared__" in unit.text(d)
                for d in walk(unit.body)
            )
        ):
            decls.append(text)
    if decls:
        first = unit.body.named_children[0] if unit.body.named_children else None
        at = unit.body.start_byte + 1
        indent = "    "
        change.insert(at, "\n" + "\n".join(indent + d for d in decls))
        change.notes.append("file-scope shared arrays declared in the kernel: " + ", ".join(decls))
        del first
