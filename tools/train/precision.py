"""Compute precision of the PyTorch tooling: bf16 autocast where the CPU has native bf16, else f32.

bf16 autocast is ~8x faster than f32 on a CPU with AVX512-BF16 or AMX (the machines the
earlier training runs used), but on one without them (e.g. an AVX2-only AMD EPYC) PyTorch
emulates it: measured 1.3 GFLOP/s against 62 GFLOP/s for f32 on a 256x704 matmul, 2 threads,
2026-12-02 (docs/history/model-training-runs.md, "Eighteenth run"). "auto" picks by /proc/cpuinfo's flags on a CPU,
and bf16 on a CUDA device (train.py --device cuda).
"""
import contextlib

import torch

CHOICES = ("auto", "bf16", "f32")
_FAST_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_has_fast_bf16(cpuinfo_path="/proc/cpuinfo"):
    """True when the CPU flags name a native bf16 dot product (AVX512-BF16 or AMX-BF16)."""
    try:
        with open(cpuinfo_path) as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line.split(":", 1)[1].split()
                    return any(fl in flags for fl in _FAST_BF16_FLAGS)
    except OSError:
        pass
    return False


def resolve(choice, cpuinfo_path="/proc/cpuinfo", device_type="cpu"):
    """'bf16' or 'f32' for a --precision value (auto: bf16 on CUDA or a CPU with native bf16)."""
    if choice not in CHOICES:
        raise ValueError("precision must be one of %s, got %r" % (", ".join(CHOICES), choice))
    if choice == "auto":
        return "bf16" if device_type == "cuda" or cpu_has_fast_bf16(cpuinfo_path) else "f32"
    return choice


_mode = None  # resolved from "auto" on first use unless set_mode() chose
_device_type = "cpu"  # the autocast device type: "cpu" or "cuda"


def set_mode(choice, device_type="cpu"):
    """Sets the process-wide compute precision and the device type the forward runs on;
    returns the resolved precision ('bf16' or 'f32')."""
    global _mode, _device_type
    _device_type = device_type
    _mode = resolve(choice, device_type=device_type)
    return _mode


def autocast():
    """The forward's context: bf16 autocast, or nothing for f32 (auto until set_mode() is called)."""
    global _mode
    if _mode is None:
        _mode = resolve("auto")
    if _mode == "bf16":
        return torch.autocast(_device_type, dtype=torch.bfloat16)
    return contextlib.nullcontext()
