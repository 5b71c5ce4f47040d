"""ONNX's random ops: RandomUniform, RandomNormal (and their -Like forms), Bernoulli and Multinomial. The numbers
are drawn once, at import, with numpy's generator seeded by the node's ``seed`` attribute (or, without one, by the
node's output name): a built model is a pure function of its inputs, so each run uses the same draws (a VAE
encoder's sample, ViTMAE's masking noise), which the importer says in a warning. Bernoulli and Multinomial
compare those uniform draws with probabilities computed at run time."""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING

import numpy as np

from autosched.relay import ir as relay_ir
from autosched.relay import op as relay_op
from autosched.relay.frontend.onnx.importer import _GraphConverter, logger
from autosched.relay.frontend.onnx.registry import register
from autosched.relay.ir.expr import Expr

if TYPE_CHECKING:  # pragma: no cover
    import onnx


def _generator(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> np.random.Generator:
    seeded = "seed" in attrs
    logger.warning("%s %r: random numbers drawn once at import (%s); every run of the built model uses the same",
                   node.op_type, node.output[0], f"seed {attrs['seed']}" if seeded else "no seed: seeded by its name")
    key = int(np.float32(attrs["seed"]).view(np.uint32)) if seeded else zlib.crc32(node.output[0].encode())
    return np.random.default_rng([key, int(seeded)])


def _dtype(g: _GraphConverter, attrs: dict, like: str | None, default: str = "float32") -> str:
    from onnx import helper

    if "dtype" in attrs:
        return str(np.dtype(helper.tensor_dtype_to_np_dtype(int(attrs["dtype"]))))
    return g.dtype(like) if like else default


def _shape(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> tuple[int, ...]:
    if node.op_type.endswith("Like"):
        return g.shape(node.input[0])
    if "shape" not in attrs:
        g._fail("the shape attribute is required")
    return tuple(int(d) for d in attrs["shape"])


@register("RandomUniform", "RandomUniformLike", "RandomNormal", "RandomNormalLike")
def _random(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> np.ndarray:
    """Uniform draws in [low, high), or normal ones of mean ``mean`` and standard deviation ``scale``: a constant."""
    like = node.input[0] if node.op_type.endswith("Like") else None
    rng, shape = _generator(g, node, attrs), _shape(g, node, attrs)
    if node.op_type.startswith("RandomUniform"):
        draws = rng.uniform(float(attrs.get("low", 0.0)), float(attrs.get("high", 1.0)), shape)
    else:
        draws = rng.normal(float(attrs.get("mean", 0.0)), float(attrs.get("scale", 1.0)), shape)
    return draws.astype(_dtype(g, attrs, like))


@register("Bernoulli")
def _bernoulli(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """1 where a uniform draw in [0, 1) falls below the input's probability, else 0."""
    p = node.input[0]
    draws = _generator(g, node, attrs).random(g.shape(p)).astype(g.dtype(p))
    hit = relay_op.compare("less", relay_ir.const(draws), g.tensor(p))
    return relay_op.cast(hit, _dtype(g, attrs, p))


@register("Multinomial")
def _multinomial(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """``sample_size`` classes per row of unnormalised log-probabilities [batch, classes]: a uniform draw u picks
    the first class whose cumulative probability exceeds it (the count of classes whose cumulative probability
    is at most u)."""
    x = node.input[0]
    shape = g.shape(x)
    if len(shape) != 2:
        g._fail(f"the input must be [batch, classes], got shape {list(shape)}")
    batch, classes = shape
    samples = int(attrs.get("sample_size", 1))
    dtype = _dtype(g, attrs, None, "int32")
    if dtype not in ("int32", "int64"):
        g._fail(f"dtype must be int32 or int64, got {dtype}")
    cdf = relay_op.cumsum(relay_op.nn.softmax(g.tensor(x), axis=1), axis=1)
    draws = _generator(g, node, attrs).random((batch, samples, 1)).astype(g.dtype(x))
    below = relay_op.compare("less_equal", relay_op.reshape(cdf, (batch, 1, classes)), relay_ir.const(draws))
    picked = relay_op.sum(relay_op.cast(below, "int32"), axis=[2])
    return relay_op.cast(relay_op.minimum(picked, relay_ir.const(np.int32(classes - 1))), dtype)
