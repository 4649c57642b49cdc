#!/usr/bin/env python3
"""Check, in the kernels' compiled code, that every product's inner loop keeps its sums in registers.

usage: check-registers.py OBJECT...

Disassembles each object (objdump -d) and finds its innermost product loops (from the control-flow
graph's blocks, their dominators and the edges back to a dominating header), each with its own
instructions (not those of a loop inside it). A loop with at least MIN_FMAS multiply-adds (vfmadd*,
vfnmadd*, vfmsub*, vdpbf16ps; in the portable tier's baseline x86-64 code, which has no FMA, its SSE
adds when it multiplies as often: a heuristic that holds for the project's own -O2 build, while at
-O3 GCC's unrolled remainder of the one-row (in, out) product and swiglu's exp trip it; clang 14 at
-O2 keeps one of the twelve vectors of sums of decode's three runs of panels (gemv_panels_portable) on
the stack, which GCC keeps in registers), or
with tile products (tdpbf16ps), is a product's, and fails when the compiler kept its accumulators or
operands in memory:
  - a vector register stored to a stack slot that the loop's vector instructions read back (a
    spill of a value the loop carries; a loop-invariant constant only read from there costs what
    one read from the program's data does, and a staging buffer a tile load reads is no spill), or
  - stores to what the loop's multiply-adds read, more than one for every MIN_FMAS of them: sums
    in memory, each step a load, an FMA and a store (what issue #20 found in the AVX-512 tile8).
    The one-row product on (in, out) W (gemv) adds 8 rows of W into y in memory at a time by
    design: 2 stores for 16 multiply-adds;
  - a tile stored (tilestored) inside a loop of tile products: its C tiles kept in memory.
Every tier's objects are built on every machine, so this holds for the tiers the CPU lacks too.

The shuffles that lay data out keep it in registers too: the load-time transposes into panels and
into (in, out) (avx2.c's, which the avx512 tier's load uses as well) and the amx tier's packing of X
into pairs (amx.c). Their functions (STAGED: those of them the object has; at least one must be
there) may neither move a vector register to or from the stack nor take a stack slot's address (a
pointer to an array on the stack): GCC compiled a transpose written over arrays in loops that way,
every stage a store and a load, at a third of the speed. (The portable tier stages its 32 x 8
transposes' lines in a buffer on the stack by design, and is not checked so.)
Prints one line per object (loops checked, the most multiply-adds in one), one per failure, and exits 1
on any, or when an object has no product loop at all.
"""
import re
import subprocess
import sys

MIN_FMAS = 4
FMA = re.compile(r"^(vfn?m(add|sub)[0-9]+[ps][sd]|vdpbf16ps|tdpbf16ps)$")
SSE_ADD = re.compile(r"^add[ps]s$")
SSE_MUL = re.compile(r"^mul[ps]s$")
STORE = re.compile(r"^v?mov")  # a move of a vector register (the operands name one) to memory: a store
FUNC = re.compile(r"^[0-9a-f]+ <([^>]+)>:$")
INSN = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$")
STACK = re.compile(r"\(%rsp[,)]")
FRAME = re.compile(r"\(%rbp[,)]")  # the stack too, in a function that keeps its frame pointer there
VREG = re.compile(r"%[xyz]mm[0-9]+")
STAGED = {  # an object's file name: its functions that lay data out in registers (above), as a pattern
    "avx2.c.o": re.compile(r"^(panels_avx2|transpose\w*|columns\d|fours)(\..*)?$"),
    "amx.c.o": re.compile(r"^(pack_tile|pack_b|nk_pack_amx|transpose16)(\..*)?$"),
}


def functions(obj):
    """{name: [(addr, mnemonic, operands)]} of the object's code."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", obj], check=True, capture_output=True,
                         text=True).stdout
    funcs, cur = {}, None
    for line in out.splitlines():
        m = FUNC.match(line)
        if m:
            cur = funcs.setdefault(m.group(1), [])
            continue
        m = INSN.match(line)
        if m and cur is not None:
            ops = re.sub(r"\s*#.*$", "", m.group(3)).strip()
            cur.append((int(m.group(1), 16), m.group(2), ops))
    return funcs


def memory_operand(ops):
    """The memory operand of an AT&T instruction's operands, or None."""
    m = re.search(r"(-?0x[0-9a-f]+|-?[0-9]+)?\((%[a-z0-9]+)(,%[a-z0-9]+)?(,[0-9])?\)", ops)
    return m.group(0) if m else None


def is_pad(mn):
    return re.match(r"(nop|xchg|data16|cs$)", mn) is not None


def loops_of(insns):
    """(start, end, body) of the function's innermost product loops: of its natural loops (a header
    block and the blocks of the edges back to it, from blocks it dominates), those with no loop
    inside that multiply-adds; body is its instructions, wherever the compiler placed them, less
    those of the loops inside it (a k-loop that fetches lines in a small loop of its own is still
    the k-loop). The entries are the function's first block and the targets of indirect jumps (a
    switch's): blocks reached only through the padding after a jump."""
    n = len(insns)
    index = {addr: i for i, (addr, _, _) in enumerate(insns)}
    succ = [[] for _ in insns]
    leaders = {0}
    for i, (addr, mn, ops) in enumerate(insns):
        direct = mn.startswith("j") and re.fullmatch(r"[0-9a-f]+( <[^>]*>)?", ops)
        target = index.get(int(ops.split()[0], 16)) if direct else None
        if mn.startswith("j") or mn.startswith("ret"):
            leaders.add(i + 1)
            if target is not None:
                leaders.add(target)
        falls = not (mn.startswith("ret") or mn == "jmp")
        succ[i] = [j for j in ([i + 1] if falls else []) + ([target] if target is not None else []) if j < n]
    starts = sorted(x for x in leaders if x < n)
    block_of, blocks = {}, []
    for k, st in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else n
        blocks.append(range(st, end))
        for i in range(st, end):
            block_of[i] = k
    bsucc = [sorted({block_of[j] for j in succ[b[-1]]}) for b in blocks]
    bpred = [[] for _ in blocks]
    for u, vs in enumerate(bsucc):
        for v in vs:
            bpred[v].append(u)
    pad = [all(is_pad(insns[i][1]) for i in b) for b in blocks]
    dead = [pad[b] and not bpred[b] for b in range(len(blocks))]
    preds = [[p for p in bpred[b] if not dead[p]] for b in range(len(blocks))]
    roots = [b for b in range(len(blocks)) if b == 0 or (not pad[b] and not preds[b])]
    # dominators, iteratively, as bit sets over the blocks reachable from the roots
    order, seen, todo = [], set(roots), list(roots)
    while todo:
        u = todo.pop()
        order.append(u)
        for v in bsucc[u]:
            if v not in seen:
                seen.add(v)
                todo.append(v)
    everything = sum(1 << b for b in seen)
    dom = {b: (1 << b) if b in roots else everything for b in seen}
    changed = True
    while changed:
        changed = False
        for b in order:
            if b in roots:
                continue
            d = everything
            for p in preds[b]:
                if p in dom:
                    d &= dom[p]
            d |= 1 << b
            if d != dom[b]:
                dom[b], changed = d, True
    bodies = {}
    for u in seen:
        for h in bsucc[u]:
            if dom[u] >> h & 1:  # u -> h is an edge back to a header that dominates it
                body, todo = {h, u}, [u] if u != h else []  # a block that loops on itself is the whole loop
                while todo:
                    for p in preds[todo.pop()]:
                        if p not in body:
                            body.add(p)
                            todo.append(p)
                bodies[h] = bodies.get(h, frozenset()) | body

    def fmas(body):
        return any(FMA.match(insns[i][1]) for blk in body for i in blocks[blk])

    out = []
    for h, body in sorted(bodies.items()):
        inner = [b for f, b in bodies.items() if f != h and b < body]
        if any(fmas(b) for b in inner):
            continue  # not an innermost product loop: its inner loops are checked on their own
        own = [insns[i] for blk in sorted(body - set().union(*inner)) for i in blocks[blk]]
        out.append((insns[blocks[h][0]][0], max(insns[blocks[blk][-1]][0] for blk in body), own))
    return out


def check_loop(body, frame):
    """(FMAs, [what fails]) of one loop's instructions; frame: %rbp is the function's frame pointer."""
    fmas = [(mn, ops) for _, mn, ops in body if FMA.match(mn)]
    if not fmas:  # code for the baseline x86-64 (the portable tier): a multiply and an add, each an SSE instruction
        adds = [(mn, ops) for _, mn, ops in body if SSE_ADD.match(mn)]
        if sum(1 for _, mn, _ in body if SSE_MUL.match(mn)) >= len(adds):
            fmas = adds
    tiles = any(mn == "tdpbf16ps" for mn, _ in fmas)
    if len(fmas) < MIN_FMAS and not tiles:
        return 0, []
    bad, sums = [], []
    for addr, mn, ops in body:
        if mn.startswith("tilestore"):
            bad.append(f"{addr:x}: {mn} {ops} (a tile stored inside a loop of tile products: C kept in memory)")
    fma_mem = {memory_operand(ops) for mn, ops in fmas} - {None}
    stores, reads = [], set()
    for addr, mn, ops in body:
        mem = memory_operand(ops)
        if mem is None or not VREG.search(ops) or mn.startswith("prefetch"):
            continue
        if STORE.match(mn) and ops.rsplit(",", 1)[-1].strip().endswith(")"):
            stores.append((addr, mn, ops, mem))
        else:
            reads.add(mem)
    for addr, mn, ops, mem in stores:
        if (STACK.search(mem) or (frame and FRAME.search(mem))) and mem in reads:
            bad.append(f"{addr:x}: {mn} {ops} (a vector register spilled to the stack and read back in the loop)")
        elif mem in fma_mem:
            sums.append(f"{addr:x}: {mn} {ops} (stores what a multiply-add of the loop reads: a sum kept in memory)")
    if len(sums) * MIN_FMAS > len(fmas):
        bad += sums
    return len(fmas), bad


def has_frame(insns):
    """Whether the function keeps its frame pointer in %rbp (so that %rbp's operands are the stack)."""
    return any(mn == "mov" and ops == "%rsp,%rbp" for _, mn, ops in insns)


def check_staged(obj, funcs):
    """[what fails] of the object's functions that lay data out in registers (STAGED), or None."""
    pattern = next((p for suffix, p in STAGED.items() if obj.endswith("/" + suffix) or obj == suffix), None)
    if pattern is None:
        return None
    names = [n for n in funcs if pattern.match(n)]
    if not names:
        return [f"{obj}: none of its functions matches {pattern.pattern}: a transpose was renamed or inlined "
                "elsewhere; name it in STAGED"]
    bad = []
    for name in names:
        insns = funcs[name]
        frame = has_frame(insns)
        for k, (addr, mn, ops) in enumerate(insns):
            on_stack = STACK.search(ops) or (frame and FRAME.search(ops))
            if not on_stack or not (mn.startswith("lea") or VREG.search(ops)):
                continue
            if mn.startswith("lea") and (ops.endswith(",%rsp") or (  # the epilogue; the prologue's realignment:
                    k + 1 < len(insns) and insns[k + 1][1] == "and" and insns[k + 1][2].endswith(",%rsp"))):
                continue
            bad.append(f"{obj}: {name}, {addr:x}: {mn} {ops} (its data go through the stack, not registers)")
    return bad


def main(objs):
    failed = False
    for obj in objs:
        loops, most, fails = 0, 0, []
        funcs = functions(obj)
        staged = check_staged(obj, funcs)
        if staged is not None:
            print(f"{obj}: the transposes and packing keep their data in registers: "
                  f"{len(staged)} instructions moving them through the stack")
            for f in staged:
                print(f)
            failed = failed or bool(staged)
        for name, insns in funcs.items():
            frame = has_frame(insns)
            for start, end, body in loops_of(insns) if insns else []:
                n, bad = check_loop(body, frame)
                if n:
                    loops, most = loops + 1, max(most, n)
                fails += [f"{obj}: {name}, the loop at {start:x}-{end:x}: {b}" for b in bad]
        print(f"{obj}: {loops} product loops (at most {most} multiply-adds in one), "
              f"{len(fails)} instructions keeping their values in memory")
        for f in fails:
            print(f)
        if loops == 0:
            print(f"{obj}: no product loop found: expected a tier's kernels, compiled with optimization")
        failed = failed or bool(fails) or loops == 0
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__.split("\n\n")[1])
    sys.exit(main(sys.argv[1:]))
