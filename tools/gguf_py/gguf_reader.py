"""Minimal GGUF (v2/v3) reader for bicache tooling and self-checks (pure Python + numpy)."""
from __future__ import annotations

import struct
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

try:
    from . import gguf_writer as gw
except ImportError:  # run as a script
    import gguf_writer as gw  # type: ignore


@dataclass
class TensorInfo:
    name: str
    ne: list[int]
    ggml_type: int
    offset: int        # relative to data section
    abs_offset: int    # absolute file offset
    nbytes: int


class GGUFReader:
    def __init__(self, path: str):
        with open(path, "rb") as f:
            self.buf = f.read()
        self.pos = 0
        if self.buf[:4] != gw.GGUF_MAGIC:
            raise ValueError("not a GGUF file")
        self.pos = 4
        self.version = self._u("<I")
        if self.version not in (2, 3):
            raise ValueError(f"unsupported GGUF version {self.version}")
        n_tensors = self._u("<Q")
        n_kv = self._u("<Q")
        self.kv: dict[str, Any] = {}
        self.kv_types: dict[str, tuple[int, int | None]] = {}
        for _ in range(n_kv):
            key = self._str()
            vtype = self._u("<I")
            elem = None
            if vtype == gw.T_ARRAY:
                elem = struct.unpack_from("<I", self.buf, self.pos)[0]
            if key in self.kv:
                raise ValueError(f"duplicate key {key}")
            self.kv[key] = self._val(vtype)
            self.kv_types[key] = (vtype, elem)
        self.alignment = int(self.kv.get("general.alignment", gw.DEFAULT_ALIGNMENT))
        infos = []
        for _ in range(n_tensors):
            name = self._str()
            nd = self._u("<I")
            ne = list(struct.unpack_from(f"<{nd}Q", self.buf, self.pos))
            self.pos += 8 * nd
            gt = self._u("<I")
            off = self._u("<Q")
            infos.append((name, ne, gt, off))
        self.data_offset = self.pos + ((-self.pos) % self.alignment)
        self.tensors: dict[str, TensorInfo] = {}
        for name, ne, gt, off in infos:
            if off % self.alignment:
                raise ValueError(f"tensor {name} misaligned")
            nb = gw.tensor_nbytes(ne, gt)
            ab = self.data_offset + off
            if ab + nb > len(self.buf):
                raise ValueError(f"tensor {name} out of bounds")
            self.tensors[name] = TensorInfo(name, ne, gt, off, ab, nb)

    # primitives
    def _u(self, fmt):
        v = struct.unpack_from(fmt, self.buf, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return v

    def _str(self) -> str:
        n = self._u("<Q")
        s = self.buf[self.pos:self.pos + n]
        if len(s) != n:
            raise ValueError("truncated string")
        self.pos += n
        return s.decode("utf-8")

    def _val(self, vtype: int):
        if vtype == gw.T_STRING:
            return self._str()
        if vtype == gw.T_ARRAY:
            et = self._u("<I")
            n = self._u("<Q")
            if et in gw._SCALAR_FMT and et != gw.T_BOOL:
                dt = np.dtype(gw._SCALAR_FMT[et])
                a = np.frombuffer(self.buf, dtype=dt, count=n, offset=self.pos)
                self.pos += n * dt.itemsize
                return a.tolist()
            return [self._val(et) for _ in range(n)]
        if vtype == gw.T_BOOL:
            v = self.buf[self.pos]
            self.pos += 1
            return bool(v)
        return self._u(gw._SCALAR_FMT[vtype])

    # tensor access
    def raw(self, name: str) -> bytes:
        t = self.tensors[name]
        return self.buf[t.abs_offset:t.abs_offset + t.nbytes]

    def tensor(self, name: str) -> np.ndarray:
        """De-quantised float32, numpy shape = reversed(ne)."""
        t = self.tensors[name]
        n = int(np.prod(t.ne))
        return gw.decode_tensor(self.raw(name), t.ggml_type, n).reshape(list(reversed(t.ne)))


def main(argv):
    r = GGUFReader(argv[1])
    print(f"GGUF v{r.version}, {len(r.kv)} kv, {len(r.tensors)} tensors, data at {r.data_offset}")
    for k, v in r.kv.items():
        if isinstance(v, list):
            print(f"  {k} = [{len(v)} items] {v[:5]}...")
        elif isinstance(v, str) and len(v) > 80:
            print(f"  {k} = {v[:80]!r}...")
        else:
            print(f"  {k} = {v!r}")
    for t in r.tensors.values():
        print(f"  {t.name:32s} ne={t.ne} type={t.ggml_type} off={t.offset} bytes={t.nbytes}")


if __name__ == "__main__":
    main(sys.argv)
