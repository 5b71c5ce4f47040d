"""Does what torch's default ONNX exporter writes import? Small random Hugging Face models (encoders, decoders,
vision and audio models) and torch.nn layers exported by ``torch.onnx.export(..., dynamo=True)`` (torch's default
since 2.9), each imported with ``relay.frontend.from_onnx``, built (default schedules) and run, its first output
compared with torch's own.

    python benchmarks/survey_torch_exports.py --torch-python /tmp/tv/bin/python [--models bert,llama] [--dir DIR]
                                              [--opset N] [--legacy]

The project's environment has no PyTorch: ``--torch-python`` names an interpreter that has torch, transformers and
onnxscript (e.g. ``pip install torch transformers onnxscript --index-url https://download.pytorch.org/whl/cpu``),
which exports each model to ``--dir`` once (kept: later runs reuse the files) with its input and torch's output;
``--opset`` asks the exporter for that opset (23 and later write Attention, RMSNormalization and RotaryEmbedding
nodes), ``--legacy`` uses the TorchScript-based exporter (``dynamo=False``, what ``relay.frontend.from_pytorch``
calls).
Prints a markdown table: the model, its nodes and kernels, the build time, and the largest difference from torch
relative to torch's largest output, or what stopped it (an export failure, the operators autosched lacks).
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _onnx_sides import build_or_status  # noqa: E402

#: name -> (the Python expression that makes the module, its inputs), read by the exporter in the torch interpreter
MODELS = {
    "bert": ("T.BertModel(T.BertConfig(**SMALL))", "IDS"),
    "distilbert": ("T.DistilBertModel(T.DistilBertConfig(vocab_size=100, dim=64, n_layers=2, n_heads=4, "
                   "hidden_dim=128))", "IDS"),
    "roberta": ("T.RobertaModel(T.RobertaConfig(**SMALL, pad_token_id=1))", "IDS"),
    "albert": ("T.AlbertModel(T.AlbertConfig(**SMALL, embedding_size=32))", "IDS"),
    "electra": ("T.ElectraModel(T.ElectraConfig(**SMALL, embedding_size=32))", "IDS"),
    "deberta_v2": ("T.DebertaV2Model(T.DebertaV2Config(**SMALL, max_position_embeddings=64, relative_attention=True, "
                   "position_buckets=8, pos_att_type=['p2c', 'c2p']))", "IDS"),
    "t5_encoder": ("T.T5EncoderModel(T.T5Config(vocab_size=100, d_model=64, d_kv=16, d_ff=128, num_layers=2, "
                   "num_heads=4))", "IDS"),
    "bart": ("T.BartModel(T.BartConfig(vocab_size=100, d_model=64, encoder_layers=2, decoder_layers=2, "
             "encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, "
             "max_position_embeddings=64))", "IDS"),
    "gpt2": ("T.GPT2LMHeadModel(T.GPT2Config(vocab_size=100, n_embd=64, n_layer=2, n_head=4))", "IDS"),
    "llama": ("T.LlamaForCausalLM(T.LlamaConfig(**SMALL, num_key_value_heads=2))", "IDS"),
    "qwen2": ("T.Qwen2ForCausalLM(T.Qwen2Config(**SMALL, num_key_value_heads=2))", "IDS"),
    "mistral": ("T.MistralForCausalLM(T.MistralConfig(**SMALL, num_key_value_heads=2, sliding_window=8))", "IDS"),
    "gemma": ("T.GemmaForCausalLM(T.GemmaConfig(**SMALL, num_key_value_heads=1, head_dim=16))", "IDS"),
    "phi3": ("T.Phi3ForCausalLM(T.Phi3Config(**SMALL, num_key_value_heads=4, pad_token_id=0))", "IDS"),
    "falcon": ("T.FalconForCausalLM(T.FalconConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, "
               "num_attention_heads=4, alibi=True))", "IDS"),
    "bloom": ("T.BloomForCausalLM(T.BloomConfig(vocab_size=100, hidden_size=64, n_layer=2, n_head=4))", "IDS"),
    "gpt_neox": ("T.GPTNeoXForCausalLM(T.GPTNeoXConfig(**SMALL, rotary_pct=0.5))", "IDS"),
    "opt": ("T.OPTForCausalLM(T.OPTConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, "
            "num_attention_heads=4, ffn_dim=128, word_embed_proj_dim=64, max_position_embeddings=64))", "IDS"),
    "mamba": ("T.MambaModel(T.MambaConfig(vocab_size=100, hidden_size=64, state_size=8, num_hidden_layers=2))",
              "IDS"),
    "vit": ("T.ViTModel(T.ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, "
            "intermediate_size=128, image_size=32, patch_size=8))", "IMG32"),
    "dinov2": ("T.Dinov2Model(T.Dinov2Config(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, "
               "image_size=32, patch_size=8, mlp_ratio=2))", "IMG32"),
    "beit": ("T.BeitModel(T.BeitConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, "
             "intermediate_size=128, image_size=32, patch_size=8, use_relative_position_bias=True))", "IMG32"),
    "clip_vision": ("T.CLIPVisionModel(T.CLIPVisionConfig(hidden_size=64, num_hidden_layers=2, "
                    "num_attention_heads=4, intermediate_size=128, image_size=32, patch_size=8))", "IMG32"),
    "clip_text": ("T.CLIPTextModel(T.CLIPTextConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, "
                  "num_attention_heads=4, intermediate_size=128, max_position_embeddings=32))", "IDS"),
    "vit_mae": ("T.ViTMAEModel(T.ViTMAEConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, "
                "intermediate_size=128, image_size=32, patch_size=8, mask_ratio=0.0))", "IMG32"),
    "yolos": ("T.YolosModel(T.YolosConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, "
              "intermediate_size=128, image_size=[64, 64], patch_size=16, num_detection_tokens=10))", "IMG64"),
    "swin": ("T.SwinModel(T.SwinConfig(image_size=64, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 4], "
             "window_size=4))", "IMG64"),
    "swinv2": ("T.Swinv2Model(T.Swinv2Config(image_size=64, patch_size=4, embed_dim=16, depths=[1, 1], "
               "num_heads=[2, 4], window_size=4))", "IMG64"),
    "convnext": ("T.ConvNextModel(T.ConvNextConfig(hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1]))", "IMG64"),
    "convnextv2": ("T.ConvNextV2Model(T.ConvNextV2Config(hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1]))",
                   "IMG64"),
    "resnet": ("T.ResNetModel(T.ResNetConfig(hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1], "
               "embedding_size=16))", "IMG64"),
    "regnet": ("T.RegNetModel(T.RegNetConfig(hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1], groups_width=8, "
               "embedding_size=16))", "IMG64"),
    "mobilenet_v2": ("T.MobileNetV2Model(T.MobileNetV2Config(image_size=64, depth_multiplier=0.35))", "IMG64"),
    "levit": ("T.LevitModel(T.LevitConfig(image_size=64, hidden_sizes=[32, 48, 64], num_attention_heads=[1, 2, 2], "
              "depths=[1, 1, 1], key_dim=[8, 8, 8]))", "IMG64"),
    "poolformer": ("T.PoolFormerModel(T.PoolFormerConfig(hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1]))",
                   "IMG64"),
    "segformer": ("T.SegformerForSemanticSegmentation(T.SegformerConfig(num_encoder_blocks=2, depths=[1, 1], "
                  "sr_ratios=[2, 1], hidden_sizes=[16, 32], num_attention_heads=[1, 2], decoder_hidden_size=32, "
                  "num_labels=3, patch_sizes=[7, 3], strides=[4, 2]))", "IMG64"),
    "wav2vec2": ("T.Wav2Vec2Model(T.Wav2Vec2Config(**AUDIO))", "WAVE"),
    "hubert": ("T.HubertModel(T.HubertConfig(**AUDIO))", "WAVE"),
    "whisper_encoder": ("T.WhisperModel(T.WhisperConfig(vocab_size=100, pad_token_id=0, bos_token_id=1, "
                        "eos_token_id=2, decoder_start_token_id=1, d_model=64, encoder_layers=2, decoder_layers=2, "
                        "encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128, "
                        "decoder_ffn_dim=128, num_mel_bins=16, max_source_positions=32)).encoder", "MEL"),
    "lstm": ("Rnn(torch.nn.LSTM)", "SEQ"),
    "gru": ("Rnn(torch.nn.GRU)", "SEQ"),
    "transformer_encoder": ("torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(64, 4, 128, "
                            "batch_first=True), 2)", "TOKENS"),
    "conv_norms_upsampling": ("Misc()", "IMG16"),
    "sdpa_causal": ("Sdpa()", "QKV"),
}

EXPORT = r"""
import sys, numpy as np, torch, transformers as T
torch.manual_seed(0)
name, expr, inputs, out, opset, legacy = sys.argv[1:7]
SMALL = dict(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
AUDIO = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, conv_dim=(32, 32),
             conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4)
INPUTS = {"IDS": lambda: (torch.randint(3, 100, (1, 16)),), "IMG32": lambda: (torch.randn(1, 3, 32, 32),),
          "IMG64": lambda: (torch.randn(1, 3, 64, 64),), "IMG16": lambda: (torch.randn(1, 3, 16, 16),),
          "WAVE": lambda: (torch.randn(1, 4000),), "MEL": lambda: (torch.randn(1, 16, 64),),
          "SEQ": lambda: (torch.randn(1, 10, 16),), "TOKENS": lambda: (torch.randn(1, 12, 64),),
          "QKV": lambda: tuple(torch.randn(1, 4, 16, 32) for _ in range(3))}
class Rnn(torch.nn.Module):
    def __init__(self, cls):
        super().__init__()
        self.r = cls(16, 32, num_layers=2, batch_first=True)
    def forward(self, x):
        return self.r(x)[0]
class Misc(torch.nn.Module):  # group and instance norm, SiLU, bilinear upsampling, ConvTranspose, tanh-GELU,
    def __init__(self):      # an adaptive pooling to a size that does not divide (hundreds of gathers)
        super().__init__()
        self.c, self.g = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.GroupNorm(2, 8)
        self.i, self.t = torch.nn.InstanceNorm2d(8, affine=True), torch.nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1)
    def forward(self, x):
        y = self.i(torch.nn.functional.silu(self.g(self.c(x))))
        y = self.t(torch.nn.functional.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False))
        y = torch.nn.functional.gelu(y, approximate="tanh")
        return torch.nn.functional.adaptive_avg_pool2d(y, (3, 5)) + y.mean()
class Sdpa(torch.nn.Module):
    def forward(self, q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
class First(torch.nn.Module):  # the first tensor of whatever the model returns
    def __init__(self, m):
        super().__init__()
        self.m = m
    def forward(self, *a):
        r = self.m(*a)
        if isinstance(r, (tuple, list)):
            return r[0]
        for key in ("logits", "last_hidden_state"):
            if getattr(r, key, None) is not None:
                return getattr(r, key)
        return r
model = First(eval(expr)).eval()
args = INPUTS[inputs]()
with torch.no_grad():
    options = {"opset_version": int(opset)} if int(opset) else {}
    torch.onnx.export(model, args, out + ".onnx", dynamo=legacy != "1", **options)
    ref = model(*args)
np.savez(out + ".npz", *[a.numpy() for a in args])
np.save(out + ".ref.npy", ref.numpy())
"""


def export(name: str, torch_python: str, out_dir: Path, opset: int = 0, legacy: bool = False) -> Path:
    """The model's ONNX file (with its inputs and torch's output beside it), exported unless it is there."""
    stem = out_dir / f"{name}{'_legacy' if legacy else ''}{f'_opset{opset}' if opset else ''}"
    if not Path(str(stem) + ".ref.npy").exists():
        expr, inputs = MODELS[name]
        run = subprocess.run([torch_python, "-c", EXPORT, name, expr, inputs, str(stem), str(opset), str(int(legacy))],
                             capture_output=True, text=True)
        if run.returncode != 0:
            lines = [ln for ln in run.stderr.strip().splitlines() if ln.strip()]
            raise RuntimeError(lines[-1][:160] if lines else f"exit {run.returncode}")
    return stem


def check(stem: Path) -> dict:
    """Import, build and run one export against torch's output: a row of the table."""
    import onnx

    model = onnx.load(str(stem) + ".onnx")
    row: dict = {"model": stem.name.split("_legacy")[0].split("_opset")[0], "nodes": len(model.graph.node),
                 "opset": next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))}
    args = list(np.load(str(stem) + ".npz").values())
    ref = np.load(str(stem) + ".ref.npy")
    initialized = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in initialized]
    m, info = build_or_status(model)
    row.update(info)
    if m is None:
        return row
    m.set_input(**dict(zip(names, args)))
    m.run()
    got = np.asarray(m.get_output(0))
    if got.shape != ref.shape:
        return {**row, "status": f"output shape {got.shape}, torch's {ref.shape}"}
    scale = float(np.abs(ref).max()) or 1.0
    row.update(err=float(np.abs(got.astype(np.float64) - ref).max() / scale), status="ok")
    randoms = sorted({n.op_type for n in model.graph.node if n.op_type.startswith("Random") or
                      n.op_type in ("Bernoulli", "Multinomial")})
    if randoms:  # drawn at import from autosched's generator: torch drew other numbers
        row["status"] = f"ok; its {', '.join(randoms)} draws are not torch's, so the outputs differ"
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--torch-python", required=True, help="an interpreter with torch, transformers and onnxscript")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated names (default: all)")
    ap.add_argument("--dir", default=None, help="where the exports are kept (default: a temporary directory)")
    ap.add_argument("--opset", type=int, default=0, help="the opset asked of the exporter (default: its own)")
    ap.add_argument("--legacy", action="store_true", help="the TorchScript-based exporter (dynamo=False)")
    args = ap.parse_args()
    logging.getLogger("autosched").setLevel(logging.ERROR)  # (build summaries; ViT-MAE's random-draw warning)
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown models {unknown}; known: {', '.join(MODELS)}")
    probe = ("import json, torch, transformers, onnxscript; "
             "print(json.dumps([torch.__version__, transformers.__version__, onnxscript.__version__]))")
    version = subprocess.run([args.torch_python, "-c", probe], capture_output=True, text=True)
    if version.returncode != 0:
        print(f"--torch-python {args.torch_python} lacks torch, transformers or onnxscript:\n{version.stderr}",
              file=sys.stderr)
        return 2
    torch_v, hf_v, script_v = json.loads(version.stdout)
    how = f"dynamo={not args.legacy}" + (f", opset_version={args.opset}" if args.opset else "")
    print(f"torch {torch_v}, transformers {hf_v}, onnxscript {script_v}: torch.onnx.export(..., {how})\n")
    print("| model | opset | nodes / kernels | build (s) | max diff / max torch output | status |")
    print("|---|---|---|---|---|---|")
    ok = 0
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = Path(args.dir) if args.dir else Path(tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        for name in names:
            try:
                row = check(export(name, args.torch_python, out_dir, args.opset, args.legacy))
            except RuntimeError as e:
                print(f"| {name} | | | | | export failed: {e} |", flush=True)
                continue
            ok += row["status"].startswith("ok")
            kernels = row.get("kernels", "")
            build = f"{row['build_s']:.1f}" if "build_s" in row else ""
            err = f"{row['err']:.1e}" if "err" in row else ""
            print(f"| {row['model']} | {row['opset']} | {row['nodes']} / {kernels} | {build} | {err} | "
                  f"{row['status']} |", flush=True)
    print(f"\n{ok} of {len(names)} import, build and run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
