"""Minimal GGUF v3 writer (pure Python + numpy).

Written for bicache from the GGUF format facts:
  header  : magic "GGUF", u32 version (3), u64 tensor count, u64 kv count
  kv      : string key, u32 value type, value
  tensors : string name, u32 n_dims, u64 ne[n_dims] (fastest-varying first),
            u32 ggml type, u64 offset (relative to the data section start)
  data    : starts at the first multiple of `general.alignment` (default 32) after the
            tensor infos; every tensor offset is a multiple of the alignment.
Strings are u64 length + UTF-8 bytes (no terminator). All little-endian.

Tensor convention: a numpy array of shape (..., rows, cols) is written with
ne = [cols, rows, ...] (numpy shape reversed), i.e. a PyTorch weight [out, in]
has ne = [in, out]; the bytes are the row-major numpy bytes.
"""
from __future__ import annotations

import struct
from typing import Any, Iterable

import numpy as np

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
DEFAULT_ALIGNMENT = 32

# ---- metadata value types -------------------------------------------------------------
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, \
    T_ARRAY, T_UINT64, T_INT64, T_FLOAT64 = range(13)

_SCALAR_FMT = {
    T_UINT8: "<B", T_INT8: "<b", T_UINT16: "<H", T_INT16: "<h", T_UINT32: "<I",
    T_INT32: "<i", T_FLOAT32: "<f", T_BOOL: "<?", T_UINT64: "<Q", T_INT64: "<q",
    T_FLOAT64: "<d",
}
_TYPE_NAMES = {
    "uint8": T_UINT8, "int8": T_INT8, "uint16": T_UINT16, "int16": T_INT16,
    "uint32": T_UINT32, "int32": T_INT32, "float32": T_FLOAT32, "bool": T_BOOL,
    "string": T_STRING, "array": T_ARRAY, "uint64": T_UINT64, "int64": T_INT64,
    "float64": T_FLOAT64,
}

# ---- ggml tensor types ------------------------------------------------------------------
GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q8_0, GGML_BF16 = 0, 1, 2, 8, 30
GGML_TYPE_BY_NAME = {"f32": GGML_F32, "f16": GGML_F16, "q4_0": GGML_Q4_0,
                     "q8_0": GGML_Q8_0, "bf16": GGML_BF16}
QK = 32  # block size of Q4_0 / Q8_0
# (block elements, bytes per block)
GGML_BLOCK = {GGML_F32: (1, 4), GGML_F16: (1, 2), GGML_BF16: (1, 2),
              GGML_Q8_0: (QK, 2 + QK), GGML_Q4_0: (QK, 2 + QK // 2)}
# llama.cpp general.file_type values for "mostly X"
FILE_TYPE = {GGML_F32: 0, GGML_F16: 1, GGML_Q4_0: 2, GGML_Q8_0: 7, GGML_BF16: 32}


def _type_id(t) -> int:
    return _TYPE_NAMES[t] if isinstance(t, str) else int(t)


# ---- encoders ---------------------------------------------------------------------------
def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bit patterns (uint16), round to nearest even; NaN stays (quiet) NaN."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
    r = np.where(nan, ((u >> 16) | 0x40) & 0xFFFF, r)
    return r.astype(np.uint16)


def bf16_bits_to_f32(b: np.ndarray) -> np.ndarray:
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _round_half_away(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def quantize_q8_0(x: np.ndarray) -> bytes:
    """Q8_0: per 32 values, f16 d = max|x|/127, int8 q = round(x/d) (half away from zero)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    assert x.shape[-1] % QK == 0, "Q8_0 needs the row length to be a multiple of 32"
    b = x.reshape(-1, QK)
    amax = np.abs(b).max(axis=1)
    d = amax / 127.0
    with np.errstate(divide="ignore", invalid="ignore"):
        idv = np.where(d != 0, 1.0 / d, 0.0).astype(np.float32)
    q = _round_half_away(b * idv[:, None]).clip(-127, 127).astype(np.int8)
    out = np.empty((b.shape[0], 2 + QK), dtype=np.uint8)
    out[:, :2] = d.astype(np.float16).reshape(-1, 1).view(np.uint8)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def quantize_q4_0(x: np.ndarray) -> bytes:
    """Q4_0: per 32 values, m = the value of largest |x| (signed), f16 d = m / -8,
    q = clamp(floor(x/d + 8.5), 0, 15); byte j = q[j] | q[j+16] << 4."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    assert x.shape[-1] % QK == 0, "Q4_0 needs the row length to be a multiple of 32"
    b = x.reshape(-1, QK)
    idx = np.abs(b).argmax(axis=1)
    m = b[np.arange(b.shape[0]), idx]
    d = (m / -8.0).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        idv = np.where(d != 0, 1.0 / d, 0.0).astype(np.float32)
    q = np.floor(b * idv[:, None] + 8.5).clip(0, 15).astype(np.uint8)
    out = np.empty((b.shape[0], 2 + QK // 2), dtype=np.uint8)
    out[:, :2] = d.astype(np.float16).reshape(-1, 1).view(np.uint8)
    out[:, 2:] = q[:, :QK // 2] | (q[:, QK // 2:] << 4)
    return out.tobytes()


def dequantize_q8_0(raw: bytes | np.ndarray, n: int) -> np.ndarray:
    a = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 2 + QK)[: n // QK]
    d = a[:, :2].copy().view(np.float16).astype(np.float32)
    q = a[:, 2:].copy().view(np.int8).astype(np.float32)
    return (d * q).reshape(-1)


def dequantize_q4_0(raw: bytes | np.ndarray, n: int) -> np.ndarray:
    a = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 2 + QK // 2)[: n // QK]
    d = a[:, :2].copy().view(np.float16).astype(np.float32)
    qs = a[:, 2:]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32) - 8.0
    return (d * q).reshape(-1)


def encode_tensor(x: np.ndarray, ggml_type: int) -> bytes:
    x = np.ascontiguousarray(x, dtype=np.float32)
    if ggml_type == GGML_F32:
        return x.astype("<f4").tobytes()
    if ggml_type == GGML_F16:
        return x.astype("<f2").tobytes()
    if ggml_type == GGML_BF16:
        return f32_to_bf16_bits(x).astype("<u2").tobytes()
    if ggml_type == GGML_Q8_0:
        return quantize_q8_0(x)
    if ggml_type == GGML_Q4_0:
        return quantize_q4_0(x)
    raise ValueError(f"unsupported ggml type {ggml_type}")


def decode_tensor(raw: bytes, ggml_type: int, n: int) -> np.ndarray:
    """bytes of one tensor -> flat float32 array of n elements."""
    if ggml_type == GGML_F32:
        return np.frombuffer(raw, dtype="<f4", count=n).astype(np.float32)
    if ggml_type == GGML_F16:
        return np.frombuffer(raw, dtype="<f2", count=n).astype(np.float32)
    if ggml_type == GGML_BF16:
        return bf16_bits_to_f32(np.frombuffer(raw, dtype="<u2", count=n))
    if ggml_type == GGML_Q8_0:
        return dequantize_q8_0(raw, n)
    if ggml_type == GGML_Q4_0:
        return dequantize_q4_0(raw, n)
    raise ValueError(f"unsupported ggml type {ggml_type}")


def roundtrip(x: np.ndarray, ggml_type: int) -> np.ndarray:
    """What a reader gets back after writing x as ggml_type (same shape, float32)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    return decode_tensor(encode_tensor(x, ggml_type), ggml_type, x.size).reshape(x.shape)


def tensor_nbytes(ne: Iterable[int], ggml_type: int) -> int:
    ne = list(ne)
    blk, bsz = GGML_BLOCK[ggml_type]
    assert ne[0] % blk == 0
    n = 1
    for v in ne:
        n *= v
    return n // blk * bsz


# ---- writer -----------------------------------------------------------------------------
def _pack_string(s: str | bytes) -> bytes:
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def _pack_value(vtype: int, value: Any, elem_type: int | None = None) -> bytes:
    if vtype == T_STRING:
        return _pack_string(value)
    if vtype == T_ARRAY:
        assert elem_type is not None, "arrays need an element type"
        values = list(value)
        out = [struct.pack("<IQ", elem_type, len(values))]
        if elem_type in _SCALAR_FMT and elem_type != T_BOOL:
            dt = np.dtype(_SCALAR_FMT[elem_type])
            out.append(np.asarray(values, dtype=dt).tobytes())
        elif elem_type == T_ARRAY:
            for v in values:  # nested: each v is (elem_type, values)
                out.append(_pack_value(T_ARRAY, v[1], v[0]))
        else:
            for v in values:
                out.append(_pack_value(elem_type, v))
        return b"".join(out)
    if vtype == T_BOOL:
        return struct.pack("<B", 1 if value else 0)
    return struct.pack(_SCALAR_FMT[vtype], value)


class GGUFWriter:
    def __init__(self, alignment: int = DEFAULT_ALIGNMENT, write_alignment_key: bool = True):
        self.alignment = alignment
        self.kv: list[tuple[str, int, Any, int | None]] = []
        self.tensors: list[tuple[str, list[int], int, bytes]] = []
        if write_alignment_key:
            self.add_uint32("general.alignment", alignment)

    # generic
    def add_kv(self, key: str, vtype, value, elem_type=None):
        if any(k == key for k, *_ in self.kv):
            raise KeyError(f"duplicate key {key}")
        self.kv.append((key, _type_id(vtype), value,
                        None if elem_type is None else _type_id(elem_type)))

    def add_uint8(self, k, v): self.add_kv(k, T_UINT8, v)
    def add_int8(self, k, v): self.add_kv(k, T_INT8, v)
    def add_uint16(self, k, v): self.add_kv(k, T_UINT16, v)
    def add_int16(self, k, v): self.add_kv(k, T_INT16, v)
    def add_uint32(self, k, v): self.add_kv(k, T_UINT32, int(v))
    def add_int32(self, k, v): self.add_kv(k, T_INT32, int(v))
    def add_float32(self, k, v): self.add_kv(k, T_FLOAT32, float(v))
    def add_bool(self, k, v): self.add_kv(k, T_BOOL, bool(v))
    def add_string(self, k, v): self.add_kv(k, T_STRING, v)
    def add_uint64(self, k, v): self.add_kv(k, T_UINT64, int(v))
    def add_int64(self, k, v): self.add_kv(k, T_INT64, int(v))
    def add_float64(self, k, v): self.add_kv(k, T_FLOAT64, float(v))
    def add_array(self, k, values, elem_type): self.add_kv(k, T_ARRAY, list(values), elem_type)

    # tensors
    def add_tensor(self, name: str, x: np.ndarray, ggml_type=GGML_F32):
        """x in numpy layout; written with ne = reversed(x.shape)."""
        if isinstance(ggml_type, str):
            ggml_type = GGML_TYPE_BY_NAME[ggml_type]
        if any(n == name for n, *_ in self.tensors):
            raise KeyError(f"duplicate tensor {name}")
        x = np.asarray(x, dtype=np.float32)
        ne = [int(v) for v in reversed(x.shape)] or [1]
        data = encode_tensor(x, ggml_type)
        assert len(data) == tensor_nbytes(ne, ggml_type)
        self.tensors.append((name, ne, ggml_type, data))

    def add_raw_tensor(self, name: str, ne: list[int], ggml_type: int, data: bytes):
        self.tensors.append((name, list(ne), ggml_type, bytes(data)))

    def _pad(self, n: int) -> int:
        return (-n) % self.alignment

    def to_bytes(self) -> bytes:
        out = [GGUF_MAGIC, struct.pack("<IQQ", GGUF_VERSION, len(self.tensors), len(self.kv))]
        for key, vtype, value, elem in self.kv:
            out.append(_pack_string(key))
            out.append(struct.pack("<I", vtype))
            out.append(_pack_value(vtype, value, elem))
        offset = 0
        offsets = []
        for name, ne, gt, data in self.tensors:
            offsets.append(offset)
            out.append(_pack_string(name))
            out.append(struct.pack("<I", len(ne)))
            out.append(struct.pack(f"<{len(ne)}Q", *ne))
            out.append(struct.pack("<IQ", gt, offset))
            offset += len(data)
            offset += self._pad(offset)
        head = b"".join(out)
        parts = [head, b"\0" * self._pad(len(head))]
        for name, ne, gt, data in self.tensors:
            parts.append(data)
            parts.append(b"\0" * self._pad(len(data)))
        return b"".join(parts)

    def write(self, path: str):
        with open(path, "wb") as f:
            f.write(self.to_bytes())
