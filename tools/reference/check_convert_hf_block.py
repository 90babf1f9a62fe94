#!/usr/bin/env python3
"""Checks tools/gguf_py/convert_hf_block.py on synthetic Hugging Face checkpoints: the weights of
tests/data/block's fixtures (tools/reference/make_block_golden.py, same seeds) written under the
Qwen3 / Qwen2 HF names as F32 and BF16 safetensors, with a tokenizer.json of the same synthetic
vocabulary, must convert to files whose every tensor equals the fixture's of the same type, whose
tokens equal the fixture's, and whose block keys are as given; bad inputs exit 2 naming what is
wrong. Usage: check_convert_hf_block.py OUT_DIR  (prints the converted f32 files' paths).
"""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "gguf_py"))
sys.path.insert(0, HERE)

import export as ex  # noqa: E402
import gguf_reader as gr  # noqa: E402
import gguf_writer as gw  # noqa: E402
import make_block_golden as mbg  # noqa: E402

CONVERTER = os.path.join(ROOT, "tools", "gguf_py", "convert_hf_block.py")


def write_safetensors(path: str, tensors: dict, dtype: str):
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, dtype=np.float32)
        if dtype == "BF16":
            raw = gw.f32_to_bf16_bits(a).astype("<u2").tobytes()
        else:
            raw = a.astype("<f4").tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def hf_names(sd: dict, arch: str, n_layer: int) -> dict:
    out = {"model.embed_tokens.weight": sd["tok_emb.weight"], "model.norm.weight": sd["norm.weight"]}
    if "lm_head.weight" in sd:
        out["lm_head.weight"] = sd["lm_head.weight"]
    for i in range(n_layer):
        h, p = f"model.layers.{i}.", f"layers.{i}."
        out[h + "input_layernorm.weight"] = sd[p + "attn_norm.weight"]
        for proj, ours in (("q", "wq"), ("k", "wk"), ("v", "wv"), ("o", "wo")):
            out[h + f"self_attn.{proj}_proj.weight"] = sd[p + f"{ours}.weight"]
            if arch == "fast-dllm-v2" and proj != "o":
                out[h + f"self_attn.{proj}_proj.bias"] = sd[p + f"{ours}.bias"]
        if arch == "sdar":
            out[h + "self_attn.q_norm.weight"] = sd[p + "q_norm.weight"]
            out[h + "self_attn.k_norm.weight"] = sd[p + "k_norm.weight"]
        out[h + "post_attention_layernorm.weight"] = sd[p + "ffn_norm.weight"]
        out[h + "mlp.gate_proj.weight"] = sd[p + "w_gate.weight"]
        out[h + "mlp.up_proj.weight"] = sd[p + "w_up.weight"]
        out[h + "mlp.down_proj.weight"] = sd[p + "w_down.weight"]
    return out


def make_hf_dir(d: str, arch: str, st_dtype: str):
    cfg, tied = mbg.CFGS[arch], mbg.TIED[arch]
    sd = mbg.make_state_dict(arch, cfg, mbg.SEEDS[arch], tied)
    os.makedirs(d, exist_ok=True)
    tok = ex.synthetic_tokenizer(cfg["vocab"], "dream")
    hc = {"hidden_size": cfg["d_model"], "num_attention_heads": cfg["n_head"],
          "num_key_value_heads": cfg["n_kv_head"], "num_hidden_layers": cfg["n_layer"],
          "intermediate_size": cfg["ff"], "vocab_size": cfg["vocab"],
          "rope_theta": cfg["rope_base"], "rms_norm_eps": cfg["eps"],
          "max_position_embeddings": cfg["context_length"], "tie_word_embeddings": tied,
          "eos_token_id": tok["eos"]}
    if "head_dim" in cfg:
        hc["head_dim"] = cfg["head_dim"]
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(hc, f)
    vocab, added = {}, []
    for i, (t, ty) in enumerate(zip(tok["tokens"], tok["token_type"])):
        if ty == 3:
            added.append({"id": i, "content": t, "special": True})
        else:
            vocab[t] = i
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        json.dump({"model": {"type": "BPE", "vocab": vocab, "merges": tok["merges"]},
                   "added_tokens": added}, f)
    write_safetensors(os.path.join(d, "model.safetensors"), hf_names(sd, arch, cfg["n_layer"]),
                      st_dtype)
    # The releases keep the chat template in two places: SDAR in tokenizer_config.json,
    # Fast-dLLM v2 in chat_template.jinja only.
    if arch == "sdar":
        with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
            json.dump({"chat_template": CHAT_TEMPLATES[arch]}, f)
    else:
        with open(os.path.join(d, "chat_template.jinja"), "w") as f:
            f.write(CHAT_TEMPLATES[arch])
    return tok


# Short stand-ins with each release's markers (docs/model-formats.md, "Chat formats").
CHAT_TEMPLATES = {
    "sdar": "{{- '<|im_start|>' + m.role + '\\n<think>\\n' }}",
    "fast-dllm-v2": "{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}",
}


def convert(hf: str, out: str, arch: str, dtype: str, extra=()) -> subprocess.CompletedProcess:
    cfg = mbg.CFGS[arch]
    cmd = [sys.executable, CONVERTER, hf, out, "--arch", arch, "--block-length",
           str(cfg["block_length"]), "--mask-token", "<|mask|>", "--dtype", dtype]
    if "sub_block_length" in cfg:
        cmd += ["--sub-block-length", str(cfg["sub_block_length"])]
    return subprocess.run(cmd + list(extra), capture_output=True, text=True)


def main():
    out = sys.argv[1]
    for arch in ("sdar", "fast-dllm-v2"):
        for st_dtype, dtype, fixture in (("F32", "f32", f"{arch}-tiny.gguf"),
                                         ("BF16", "bf16", f"{arch}-tiny-bf16.gguf")):
            hf = os.path.join(out, f"hf-{arch}-{st_dtype}")
            tok = make_hf_dir(hf, arch, st_dtype)
            path = os.path.join(out, f"{arch}-{dtype}.gguf")
            r = convert(hf, path, arch, dtype)
            assert r.returncode == 0, r.stderr
            got, want = gr.GGUFReader(path), gr.GGUFReader(os.path.join(ROOT, "tests", "data",
                                                                          "block", fixture))
            assert sorted(got.tensors) == sorted(want.tensors), (arch, dtype)
            for name in want.tensors:
                if want.tensors[name].ggml_type == gw.GGML_F32 and st_dtype == "BF16":
                    # norms and biases stay F32, holding the checkpoint's bf16 values
                    assert np.array_equal(got.tensor(name),
                                          gw.roundtrip(want.tensor(name), gw.GGML_BF16)), name
                else:
                    assert got.raw(name) == want.raw(name), (arch, dtype, name)
            assert got.kv["tokenizer.ggml.tokens"] == tok["tokens"]
            assert got.kv["tokenizer.ggml.mask_token_id"] == tok["mask"]
            assert got.kv["tokenizer.chat_template"] == CHAT_TEMPLATES[arch], arch
            assert got.kv["diffusion.block_length"] == mbg.CFGS[arch]["block_length"]
            print(f"ok   {arch} {st_dtype} safetensors -> {dtype}: every tensor equals {fixture}'s")
            if dtype == "f32":
                print(f"FILE {arch} {path}")
    # Bad inputs: one message each, exit status 2.
    hf = os.path.join(out, "hf-sdar-F32")
    for extra, needle in ((["--block-length", "24"], "does not divide max_position_embeddings"),
                          (["--mask-token", "<nope>"], "mask token '<nope>' is not in")):
        r = convert(hf, os.path.join(out, "bad.gguf"), "sdar", "f32", extra)
        assert r.returncode == 2 and needle in r.stderr, (extra, r.returncode, r.stderr)
        print(f"ok   bad input refused: {needle}")
    st = os.path.join(hf, "model.safetensors")
    make_hf_dir(hf, "sdar", "F32")
    with open(st, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    del header["model.layers.1.self_attn.k_norm.weight"]
    h = json.dumps(header).encode()
    with open(st, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + raw[8 + n:])
    r = convert(hf, os.path.join(out, "bad.gguf"), "sdar", "f32")
    assert r.returncode == 2 and "weight 'model.layers.1.self_attn.k_norm.weight' is missing" in \
        r.stderr, r.stderr
    print("ok   bad input refused: a missing q/k norm weight")


if __name__ == "__main__":
    main()
