"""Quantized models as onnxruntime's quantization tool makes them, on autosched and onnxruntime side by side in one
run: BERT-base (12 layers, d_model 768, 128 tokens) by ``quantize_dynamic`` (int8 weights, activations quantized
at run time for each MatMulInteger) and ResNet-50 (224 x 224) by ``quantize_static`` in the operator format
(QLinearConv, QLinearAdd, QGemm) and in its default QDQ format (QuantizeLinear/DequantizeLinear around float
ops; uint8 activations and int8 weights; calibrated on 8 random images, preprocessed by ``quant_pre_process`` so
its batch norms are folded), each next to its float model.

    python benchmarks/bench_quantized.py [--models bert_base resnet50] [--threads 2] [--rounds 6] [--seconds 1]
                                         [--target llvm] [--no-int16-products]

The float models come from ``tests/_transformer_models`` and ``tests/_onnx_models`` (seeded random weights).
autosched imports each model, builds it with default schedules and checks its output against onnxruntime's
(the largest difference relative to the largest output); then all of them (two libraries x float / quantized) are
timed in alternating rounds (benchmarks/_timing.py), each keeping its best median. onnxruntime runs its integer
kernels (VNNI or AMX where the CPU has them); so does autosched on a CPU with AVX-512 VNNI (nn.conv2d_nchwc_vnni,
nn.dense_vnni), elsewhere its int16 pmaddwd kernels (nn.conv2d_nchwc_i16; nn.dense_i16 where float32 is not
exact) or float kernels where exact (docs/relay_onnx.md); ``--no-int16-products`` builds autosched with the
PassContext option ``relay.int16_products`` off (float32 where exact, the path before). Prints the CPU. Run it
with nothing else running.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from _onnx_sides import compare, onnx_sides  # noqa: E402

import _onnx_models  # noqa: E402
import _transformer_models  # noqa: E402
from autosched.target import Target  # noqa: E402
from autosched.transform import PassContext  # noqa: E402


def quantized_bert(tmp: Path) -> tuple[dict[str, Path], dict[str, np.ndarray]]:
    import onnx
    from onnxruntime.quantization import quantize_dynamic

    sizes = _transformer_models.BERT_BASE
    model = _transformer_models.make_encoder(**sizes)
    inputs = _transformer_models.token_inputs(model, sizes["seq"], sizes["vocab"])
    onnx.save(model, tmp / "bert.onnx")
    quantize_dynamic(tmp / "bert.onnx", tmp / "bert_int8.onnx")
    return {"float": tmp / "bert.onnx", "int8": tmp / "bert_int8.onnx"}, inputs


def quantized_resnet50(tmp: Path) -> tuple[dict[str, Path], dict[str, np.ndarray]]:
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    rng = np.random.default_rng(0)

    class Images(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"data": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)} for _ in range(8)])

        def get_next(self):
            return next(self.it, None)

    onnx.save(_onnx_models.make_resnet50(), tmp / "resnet50.onnx")
    quant_pre_process(str(tmp / "resnet50.onnx"), str(tmp / "resnet50_pre.onnx"))
    # uint8 activations, int8 weights: the operator format onnxruntime runs fast on x86 (with int8 activations it
    # warns of bad performance there, and took 257 ms on Emerald Rapids)
    paths = {"float": tmp / "resnet50.onnx"}
    for kind, fmt in (("int8", QuantFormat.QOperator), ("int8 QDQ", QuantFormat.QDQ)):
        paths[kind] = tmp / f"resnet50_{fmt.name}.onnx"
        quantize_static(tmp / "resnet50_pre.onnx", paths[kind], Images(), quant_format=fmt,
                        activation_type=QuantType.QUInt8)
    return paths, {"data": np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)}


MODELS = {"bert_base": quantized_bert, "resnet50": quantized_resnet50}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--no-int16-products", action="store_true",
                    help="build with PassContext(config={'relay.int16_products': False})")
    args = ap.parse_args()
    import onnxruntime as ort

    logging.getLogger().setLevel(logging.ERROR)  # the quantizer's advice
    os.environ["AUTOSCHED_NUM_THREADS"] = str(args.threads)
    print(f"default schedules for {args.target!r} on {Target('llvm').cpu.name}, onnxruntime {ort.__version__}, "
          f"{args.threads} thread(s), relay.int16_products {'off' if args.no_int16_products else 'on'}")
    for name in args.models:
        with tempfile.TemporaryDirectory() as tmp:
            paths, inputs = MODELS[name](Path(tmp))
            with PassContext(config={"relay.int16_products": not args.no_int16_products}):
                runs = {kind: onnx_sides(p, inputs, args.threads, args.target) for kind, p in paths.items()}
        for kind, a, o, err in compare(runs, args.rounds, args.seconds):
            print(f"{name:10s} {kind:8s}: autosched {a * 1e3:8.2f} ms, onnxruntime {o * 1e3:8.2f} ms, {a / o:.2f}x "
                  f"(largest difference {err:.1e} of the largest output)", flush=True)


if __name__ == "__main__":
    main()
