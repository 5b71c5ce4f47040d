"""Checks of lowered GPU kernels shared by the GPU tests: whether the threads of a warp store coalesced."""

import numpy as np


def store_runs(func, samples=3, seed=0):
    """Per store to a global buffer (an argument) of a lowered kernel: ``(buffer, steps, shortest run)``: the
    address steps between consecutive threadIdx.x (in vectors, where the store is one vector of consecutive
    elements), and the fewest consecutive elements that consecutive threads store side by side, over every
    threadIdx.x and a few seeded values of the other loop variables."""
    from autosched.te import expr as E
    from autosched.tir import stmt as S
    from autosched.tir.arith import simplify

    rng = np.random.default_rng(seed)
    params = {id(b) for b in func.params}
    out = []

    def flat(s):
        idx, stride = 0, 1
        for i, d in zip(reversed(s.indices), reversed(s.buffer.shape)):
            idx, stride = idx + i * stride, stride * int(d)
        return idx

    def visit(s, loops, lets):
        if isinstance(s, S.For):
            loops = loops + [s]
        elif isinstance(s, S.LetStmt):
            lets = lets + [(s.var, s.value)]
        elif isinstance(s, S.BufferStore) and id(s.buffer) in params:
            tx = next((f for f in loops if f.thread_tag == "threadIdx.x"), None)
            assert tx is not None, f"a store to {s.buffer.name} outside any threadIdx.x loop"
            e = flat(s)
            for v, val in reversed(lets):
                e = E.substitute(e, {v: val})
            # a vectorized loop inside the thread: each thread stores ``width`` consecutive elements at once
            vec = next((f for f in reversed(loops) if f.kind == "vectorized" and f is not tx), None)
            width = int(vec.extent) if vec is not None else 1
            steps, shortest = set(), int(tx.extent) * width
            for _ in range(samples):
                env = {f.var: E.const(int(rng.integers(0, int(f.extent))) if isinstance(f.extent, E.IntImm) else 0)
                       for f in loops if f is not tx}
                if vec is not None:
                    env[vec.var] = E.const(0)
                    lane1 = simplify(E.substitute(e, {**env, vec.var: E.const(1), tx.var: E.const(0)}))
                    lane0 = simplify(E.substitute(e, {**env, tx.var: E.const(0)}))
                    if lane1.value - lane0.value != 1:
                        width = 1  # the vector's lanes are not consecutive addresses: no wide store
                addr = [simplify(E.substitute(e, {**env, tx.var: E.const(t)})) for t in range(int(tx.extent))]
                assert all(isinstance(a, E.IntImm) for a in addr), addr
                run = width  # in elements
                for a, b in zip(addr, addr[1:]):
                    step = b.value - a.value
                    steps.add(step // width if step % width == 0 else step / width)  # in vectors
                    if step == width:
                        run += width
                    else:
                        shortest, run = min(shortest, run), width
                shortest = min(shortest, run)
            out.append((s.buffer.name, steps, shortest))
        for c in S.stmt_children(s):
            visit(c, loops, lets)

    visit(func.body, [], [])
    return out


def assert_coalesced(func, what=""):
    """Consecutive threadIdx.x store consecutive addresses, in runs of at least 8 threads (8 floats: a whole
    32-byte memory sector), or whole rows of the output (its innermost axis longer than 1) where shorter."""
    runs = store_runs(func)
    assert runs, f"{what}: no store to a global buffer"
    for name, steps, shortest in runs:
        shape = [int(d) for d in next(b for b in func.params if b.name == name).shape]
        row = next((d for d in reversed(shape) if d > 1), 1)  # the innermost axis longer than 1
        assert 1 in steps or not steps or row == 1 or shortest >= row, (  # (or each thread stores whole rows)
            f"{what}: no two threads store to {name} side by side: {steps}")
        assert shortest >= min(8, row), (
            f"{what}: consecutive threads store runs of {shortest} elements of {name} (steps {sorted(steps)})")
