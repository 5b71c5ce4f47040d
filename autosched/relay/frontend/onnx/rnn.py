"""ONNX converters of the recurrent layers LSTM, GRU and RNN, unrolled over their (static) sequence at import,
as TVM's ONNX frontend does: the input projection of every step is one dense layer, then each step is a dense
layer of the hidden state and the gates' element-wise math, which fuse into a few kernels per step. Weights
are sliced per direction and gate with relay ops, so they stay parameters until FoldConstant (``freeze_params``
as the user chose). Forward, reverse and bidirectional directions, initial states, biases, LSTM peepholes,
``clip``, ``layout`` 0 and 1, GRU's ``linear_before_reset`` and the activations Sigmoid, Tanh and Relu are
supported; sequence lengths shorter than the sequence are refused, naming the node.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from autosched.relay import ir as relay_ir
from autosched.relay import op as relay_op
from autosched.relay.frontend.onnx.importer import _GraphConverter
from autosched.relay.frontend.onnx.registry import register
from autosched.relay.ir.expr import Expr

if TYPE_CHECKING:  # pragma: no cover
    import onnx

_ACTIVATIONS: dict[str, Callable[[Expr], Expr]] = {
    "sigmoid": relay_op.sigmoid,
    "tanh": relay_op.tanh,
    "relu": relay_op.nn.relu,
}


def _rows(x: Expr, begin: int, end: int, axis: int = 0) -> Expr:
    return relay_op.strided_slice(x, begin=[begin], end=[end], strides=[1], axes=[axis])


class _Recurrence:
    """What LSTM, GRU and RNN share: the node's inputs per direction, the activations, and the outputs."""

    def __init__(self, g: _GraphConverter, node: onnx.NodeProto, attrs: dict, gates: int, default_acts: list[str],
                 states: int):
        self.g, self.node, self.attrs = g, node, attrs
        self.layout = int(attrs.get("layout", 0))
        x = g.tensor(node.input[0])
        shape = g.shape(node.input[0])
        if len(shape) != 3:
            g._fail(f"X must be 3-D, got shape {list(shape)}")
        if self.layout:  # [batch, seq, input] -> [seq, batch, input]
            x, shape = relay_op.transpose(x, (1, 0, 2)), (shape[1], shape[0], shape[2])
        self.T, self.B, self.I = shape
        direction = attrs.get("direction", b"forward")
        direction = direction.decode() if isinstance(direction, bytes) else str(direction)
        if direction not in ("forward", "reverse", "bidirectional"):
            g._fail(f"direction {direction!r} must be forward, reverse or bidirectional")
        self.directions = ["forward", "reverse"] if direction == "bidirectional" else [direction]
        wshape = g.shape(node.input[1])
        self.H = int(attrs.get("hidden_size", wshape[1] // gates))
        if tuple(wshape) != (len(self.directions), gates * self.H, self.I):
            g._fail(f"W has shape {list(wshape)}, expected {[len(self.directions), gates * self.H, self.I]} "
                    f"({gates} gates of hidden_size {self.H})")
        self.gates = gates
        seq_lens = g.optional(node, 4)
        if seq_lens is not None:
            if not g.is_const(seq_lens):
                g._fail("sequence_lens computed at run time is not supported (the sequence is unrolled at import)")
            lens = np.asarray(g.value(seq_lens, "sequence_lens")).reshape(-1)
            if np.any(lens != self.T):
                g._fail(f"sequence_lens {lens.tolist()} shorter than the sequence ({self.T}) are not supported")
        names = [a.decode() if isinstance(a, bytes) else str(a) for a in attrs.get("activations", [])]
        names = names or default_acts * len(self.directions)
        if len(names) != len(default_acts) * len(self.directions):
            g._fail(f"activations {names} must name {len(default_acts)} functions per direction")
        unknown = [n for n in names if n.lower() not in _ACTIVATIONS]
        if unknown:
            g._fail(f"activations {unknown} are not supported (Sigmoid, Tanh and Relu are)")
        self.acts = [[_ACTIVATIONS[n.lower()] for n in names[d * len(default_acts):(d + 1) * len(default_acts)]]
                     for d in range(len(self.directions))]
        self.clip = attrs.get("clip")
        self.x = x
        self.states = states
        self._recurrent_weights: dict[tuple, tuple[Expr, Expr | None]] = {}

    def act(self, d: int, k: int, e: Expr) -> Expr:
        """Activation ``k`` of direction ``d`` on ``e``, after the cell clip when the node has one."""
        if self.clip is not None:
            e = relay_op.clip(e, -float(self.clip), float(self.clip))
        return self.acts[d][k](e)

    def weight(self, i: int, d: int) -> Expr:
        """Input ``i`` (W or R) of direction ``d``: [gates * hidden, in]."""
        return relay_op.reshape(_rows(self.g.tensor(self.node.input[i]), d, d + 1), (self.gates * self.H, -1))

    def biases(self, d: int) -> tuple[Expr | None, Expr | None]:
        """Wb and Rb of direction ``d`` ([gates * hidden] each), or None without a B input."""
        name = self.g.optional(self.node, 3)
        if name is None:
            return None, None
        b = relay_op.reshape(_rows(self.g.tensor(name), d, d + 1), (2 * self.gates * self.H,))
        n = self.gates * self.H
        return _rows(b, 0, n), _rows(b, n, 2 * n)

    def initial(self, k: int, d: int) -> Expr:
        """Initial state ``k`` (0: hidden, 1: cell) of direction ``d``: [batch, hidden], zeros when absent."""
        name = self.g.optional(self.node, 5 + k)
        if name is None:
            return relay_ir.const(np.zeros((self.B, self.H), np.float32))
        s = self.g.tensor(name)
        if self.layout:  # [batch, directions, hidden]
            return relay_op.reshape(_rows(s, d, d + 1, axis=1), (self.B, self.H))
        return relay_op.reshape(_rows(s, d, d + 1), (self.B, self.H))

    def projected_inputs(self, d: int, rb_rows: int) -> list[Expr]:
        """X W^T + Wb (+ the first ``rb_rows`` of Rb: the recurrent bias outside any reset) of every step: one
        dense layer over the T x batch rows, then one [batch, gates * hidden] slice per step. With the biases
        here, a step's recurrent dense layer and its addition of this slice fuse into one kernel."""
        rows = relay_op.reshape(self.x, (self.T * self.B, self.I))
        xw = relay_op.nn.dense(rows, self.weight(1, d))
        wb, rb = self.biases(d)
        if wb is not None:
            n = self.gates * self.H
            if rb_rows < n:
                rb = relay_op.concatenate([_rows(rb, 0, rb_rows), relay_ir.const(np.zeros(n - rb_rows, np.float32))],
                                          axis=0)
            xw = relay_op.add(xw, relay_op.add(wb, rb))
        return [relay_op.reshape(_rows(xw, t * self.B, (t + 1) * self.B), (self.B, self.gates * self.H))
                for t in range(self.T)]

    def gate(self, e: Expr, k: int) -> Expr:
        """Gate ``k`` of a [batch, gates * hidden] pre-activation."""
        return _rows(e, k * self.H, (k + 1) * self.H, axis=1)

    def run(self, step: Callable[[int, Expr, list[Expr]], list[Expr]], rb_rows: int | None = None
            ) -> tuple[Expr, ...]:
        """Unroll ``step(direction, projected input, states) -> new states`` over the sequence of each direction
        and stack the outputs: Y [seq, directions, batch, hidden] (layout 1: [batch, seq, directions, hidden]),
        then each final state [directions, batch, hidden] (layout 1: [batch, directions, hidden]). ``rb_rows``:
        the rows of Rb added with the inputs (all by default)."""
        ys, finals = [], [[] for _ in range(self.states)]
        for d, direction in enumerate(self.directions):
            xs = self.projected_inputs(d, self.gates * self.H if rb_rows is None else rb_rows)
            states = [self.initial(k, d) for k in range(self.states)]
            hs: list[Expr] = [None] * self.T  # type: ignore[list-item]
            for t in (range(self.T) if direction == "forward" else reversed(range(self.T))):
                states = step(d, xs[t], states)
                hs[t] = relay_op.reshape(states[0], (1, 1, self.B, self.H))
            ys.append(relay_op.concatenate(hs, axis=0))
            for k in range(self.states):
                finals[k].append(relay_op.reshape(states[k], (1, self.B, self.H)))
        y = relay_op.concatenate(ys, axis=1) if len(ys) > 1 else ys[0]
        outs = [relay_op.concatenate(f, axis=0) if len(f) > 1 else f[0] for f in finals]
        if self.layout:
            y = relay_op.transpose(y, (2, 0, 1, 3))
            outs = [relay_op.transpose(o, (1, 0, 2)) for o in outs]
        return (y, *outs)

    def recurrent(self, h: Expr, d: int, rows: Sequence[int] | None = None, bias: bool = False) -> Expr:
        """h R^T of direction ``d`` over the gate rows ``rows`` ([begin, end) of R) or all of them (``bias``: plus
        those rows of Rb). The slices of R and Rb are made once and shared by every step: one expression per
        step would fold into a copy of the weight per step."""
        key = (d, tuple(rows) if rows is not None else None, bias)
        if key not in self._recurrent_weights:
            r = self.weight(2, d)
            _, rb = self.biases(d) if bias else (None, None)
            if rows is not None:
                r = _rows(r, rows[0], rows[1])
                rb = None if rb is None else _rows(rb, rows[0], rows[1])
            self._recurrent_weights[key] = (r, rb)
        r, rb = self._recurrent_weights[key]
        out = relay_op.nn.dense(h, r)
        return out if rb is None else relay_op.add(out, rb)


@register("LSTM")
def _lstm(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> tuple[Expr, ...]:
    """Gates i, o, f, c (ONNX's order) with optional peepholes: C = f * C + i * g(c), H = o * h(C)."""
    if int(attrs.get("input_forget", 0)):
        g._fail("input_forget=1 (coupled input and forget gates) is not supported")
    rec = _Recurrence(g, node, attrs, gates=4, default_acts=["Sigmoid", "Tanh", "Tanh"], states=2)
    peep = g.optional(node, 7)
    peepholes = {}  # (direction, gate) -> its P slice, made once for every step
    if peep is not None:
        for d in range(len(rec.directions)):
            p = relay_op.reshape(_rows(g.tensor(peep), d, d + 1), (3 * rec.H,))
            peepholes.update({(d, k): _rows(p, k * rec.H, (k + 1) * rec.H) for k in range(3)})

    def step(d: int, x: Expr, states: list[Expr]) -> list[Expr]:
        h, c = states
        z = relay_op.add(rec.recurrent(h, d), x)
        i, o, f, cc = (rec.gate(z, k) for k in range(4))
        if peep is not None:
            i = relay_op.add(i, relay_op.multiply(peepholes[d, 0], c))
            f = relay_op.add(f, relay_op.multiply(peepholes[d, 2], c))
        i, f = rec.act(d, 0, i), rec.act(d, 0, f)
        c = relay_op.add(relay_op.multiply(f, c), relay_op.multiply(i, rec.act(d, 1, cc)))
        if peep is not None:
            o = relay_op.add(o, relay_op.multiply(peepholes[d, 1], c))
        return [relay_op.multiply(rec.act(d, 0, o), rec.act(d, 2, c)), c]

    return rec.run(step)


@register("GRU")
def _gru(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> tuple[Expr, ...]:
    """Gates z, r, h (ONNX's order): H = (1 - z) * h + z * H, the candidate's recurrent term reset before its
    weights (``linear_before_reset=0``) or after them (1, PyTorch's GRU)."""
    rec = _Recurrence(g, node, attrs, gates=3, default_acts=["Sigmoid", "Tanh"], states=1)
    before = int(attrs.get("linear_before_reset", 0))
    one = relay_ir.const(np.float32(1.0))

    def step(d: int, x: Expr, states: list[Expr]) -> list[Expr]:
        (h,) = states
        xz, xr, xh = (rec.gate(x, k) for k in range(3))
        hzr = rec.recurrent(h, d, rows=(0, 2 * rec.H))
        z = rec.act(d, 0, relay_op.add(xz, _rows(hzr, 0, rec.H, axis=1)))
        r = rec.act(d, 0, relay_op.add(xr, _rows(hzr, rec.H, 2 * rec.H, axis=1)))
        if before:
            hh = relay_op.multiply(r, rec.recurrent(h, d, rows=(2 * rec.H, 3 * rec.H), bias=True))
        else:
            hh = rec.recurrent(relay_op.multiply(r, h), d, rows=(2 * rec.H, 3 * rec.H))
        cand = rec.act(d, 1, relay_op.add(xh, hh))
        return [relay_op.add(relay_op.multiply(relay_op.subtract(one, z), cand), relay_op.multiply(z, h))]

    return rec.run(step, rb_rows=2 * rec.H if before else None)


@register("RNN")
def _rnn(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> tuple[Expr, ...]:
    """H = f(X W^T + H R^T + Wb + Rb), f Tanh by default."""
    rec = _Recurrence(g, node, attrs, gates=1, default_acts=["Tanh"], states=1)
    return rec.run(lambda d, x, states: [rec.act(d, 0, relay_op.add(rec.recurrent(states[0], d), x))])
