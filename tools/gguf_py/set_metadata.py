#!/usr/bin/env python3
"""Change metadata values of a GGUF file, leaving everything else byte for byte as it was.

  /usr/bin/python3 tools/gguf_py/set_metadata.py IN.gguf OUT.gguf --set KEY=VALUE [--set ...]

KEY must already be in the file; VALUE is read as the key's own type (string, integer, float,
bool: true/false/1/0; arrays are not supported). OUT may be IN. The key/value section is
rewritten in place, the tensor infos are copied, the data section starts at the next multiple of
the alignment, and the data section (tensor bytes, padding, trailing bytes) is copied unchanged:
tensor offsets are relative to it, so they stay valid. The result is read back and every tensor's
bytes are compared with the input's.
"""
from __future__ import annotations

import argparse
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_reader as gr  # noqa: E402
import gguf_writer as gw  # noqa: E402

_INT_TYPES = (gw.T_UINT8, gw.T_INT8, gw.T_UINT16, gw.T_INT16, gw.T_UINT32, gw.T_INT32,
              gw.T_UINT64, gw.T_INT64)


def parse_value(key: str, vtype: int, text: str):
    if vtype == gw.T_STRING:
        return text
    if vtype in _INT_TYPES:
        return int(text, 0)
    if vtype in (gw.T_FLOAT32, gw.T_FLOAT64):
        return float(text)
    if vtype == gw.T_BOOL:
        if text.lower() in ("true", "1"):
            return True
        if text.lower() in ("false", "0"):
            return False
        raise ValueError(f"{key}: '{text}' is not a bool (true/false/1/0)")
    raise ValueError(f"{key}: value type {vtype} (array) cannot be set")


def set_metadata(src: str, dst: str, updates: dict[str, str]) -> list[str]:
    """Rewrites src into dst with the given values; returns a line per changed key."""
    r = gr.GGUFReader(src)
    for key in updates:
        if key not in r.kv:
            raise KeyError(f"{key}: not in {src} (only existing keys can be set)")
    infos_end = r.pos  # the reader stops right after the tensor infos
    # Walk the key/value section again, recording where each entry lies.
    r.pos = 4 + 4 + 8 + 8
    parts = [r.buf[:r.pos]]
    log = []
    for _ in range(len(r.kv)):
        start = r.pos
        key = r._str()
        vtype = r._u("<I")
        r._val(vtype)
        if key in updates:
            new = parse_value(key, vtype, updates[key])
            log.append(f"{key}: {r.kv[key]!r} -> {new!r}")
            parts.append(gw._pack_string(key) + struct.pack("<I", vtype) +
                         gw._pack_value(vtype, new))
        else:
            parts.append(r.buf[start:r.pos])
    parts.append(r.buf[r.pos:infos_end])  # the tensor infos, unchanged
    head = b"".join(parts)
    head += b"\0" * ((-len(head)) % r.alignment)
    out = head + r.buf[r.data_offset:]
    tmp = dst + ".tmp"
    with open(tmp, "wb") as f:
        f.write(out)
    # Verify: same keys and values except the updated ones, every tensor bit-identical.
    o = gr.GGUFReader(tmp)
    assert list(o.kv) == list(r.kv), "key order changed"
    for key, v in r.kv.items():
        if key in updates:
            assert o.kv[key] == parse_value(key, r.kv_types[key][0], updates[key]), key
        else:
            assert o.kv[key] == v, key
    assert list(o.tensors) == list(r.tensors), "tensor list changed"
    for name, t in r.tensors.items():
        assert o.tensors[name].ne == t.ne and o.tensors[name].ggml_type == t.ggml_type, name
        assert o.raw(name) == r.raw(name), f"tensor {name}: bytes differ"
    os.replace(tmp, dst)
    log.append(f"{len(r.tensors)} tensors bit-identical, {len(r.buf)} -> {len(out)} bytes")
    return log


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--set", action="append", required=True, metavar="KEY=VALUE")
    a = ap.parse_args(argv)
    updates = {}
    for item in a.set:
        if "=" not in item:
            ap.error(f"--set {item}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        updates[k] = v
    try:
        for line in set_metadata(a.src, a.dst, updates):
            print(line)
    except (KeyError, ValueError, OSError, AssertionError) as e:
        print(f"set_metadata: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
