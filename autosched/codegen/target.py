"""Compilation targets: ``llvm`` (the host CPU) with ``-mcpu=``, ``-mattr=`` and ``-num-cores=`` options, and
``cuda`` (NVIDIA GPUs through NVPTX) with ``-arch=sm_80``."""

from __future__ import annotations

import os
import shlex

KINDS = ("llvm", "cuda")


class Target:
    """A parsed target string, e.g. ``llvm -mcpu=sapphirerapids -num-cores=2``."""

    def __init__(self, spec: str | Target = "llvm"):
        if isinstance(spec, Target):
            self.kind, self.options = spec.kind, dict(spec.options)
            return
        if not isinstance(spec, str) or not spec.strip():
            raise ValueError(f"target must be a non-empty string such as 'llvm', got {spec!r}")
        parts = shlex.split(spec)
        self.kind = parts[0]
        if self.kind not in KINDS:
            raise ValueError(f"unknown target kind {self.kind!r} in {spec!r}; expected one of {', '.join(KINDS)}")
        self.options: dict[str, str] = {}
        for p in parts[1:]:
            if not p.startswith("-") or "=" not in p:
                raise ValueError(f"target option {p!r} in {spec!r} must look like -key=value")
            k, v = p.lstrip("-").split("=", 1)
            if k not in ("mcpu", "mattr", "num-cores", "mtriple", "arch"):
                raise ValueError(f"unknown target option -{k} in {spec!r}")
            self.options[k] = v
        if "num-cores" in self.options:
            try:
                if int(self.options["num-cores"]) <= 0:
                    raise ValueError
            except ValueError:
                raise ValueError(f"-num-cores must be a positive integer in {spec!r}") from None

    @property
    def mcpu(self) -> str:
        if "mcpu" in self.options:
            return self.options["mcpu"]
        import llvmlite.binding as llvm

        return llvm.get_host_cpu_name()

    @property
    def arch(self) -> str:
        """The GPU architecture of a ``cuda`` target (``-arch=sm_80`` by default)."""
        return self.options.get("arch", "sm_80")

    @property
    def mattr(self) -> str:
        if self.kind == "cuda":
            return ""
        if "mattr" in self.options:
            return self.options["mattr"]
        if "mcpu" in self.options:
            return ""
        import llvmlite.binding as llvm

        return llvm.get_host_cpu_features().flatten()

    @property
    def num_cores(self) -> int:
        env = os.environ.get("AUTOSCHED_NUM_THREADS")
        if env:
            return int(env)
        if "num-cores" in self.options:
            return int(self.options["num-cores"])
        return os.cpu_count() or 1

    @property
    def key(self) -> str:
        """The target with the CPU spelled out (``llvm -mcpu=emeraldrapids``): what tuning records are keyed by,
        so records tuned on one CPU are not silently applied on another."""
        opts = dict(self.options)
        if self.kind == "llvm":
            opts["mcpu"] = self.mcpu
        else:
            opts["arch"] = self.arch
        opts.pop("num-cores", None)
        return " ".join([self.kind] + [f"-{k}={v}" for k, v in sorted(opts.items())])

    def __str__(self) -> str:
        return " ".join([self.kind] + [f"-{k}={v}" for k, v in self.options.items()])

    def __repr__(self) -> str:
        return f"Target({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Target) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))
