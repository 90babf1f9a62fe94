#!/usr/bin/env python3
"""Checks tools/gguf_py/convert_hf_llada2.py on synthetic Hugging Face LLaDA2.x checkpoints: the
weights of tests/data/block/llada2-tiny* (tools/reference/make_llada2_golden.py, the manifest's
seed) written under the checkpoint's names as F32 and BF16 safetensors (two shards, experts one
tensor each as published), with the fixture's config.json and a tokenizer.json of the same
synthetic vocabulary, must convert to files whose every tensor equals the fixture's of the same
type and whose keys are the fixture's; bad inputs exit 2 naming what is wrong.
Usage: check_convert_hf_llada2.py OUT_DIR  (prints the converted f32 file's path as FILE ...).
"""
from __future__ import annotations

import json
import os
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
import make_llada2_golden as mlg  # noqa: E402
from check_convert_hf_block import write_safetensors  # noqa: E402

CONVERTER = os.path.join(ROOT, "tools", "gguf_py", "convert_hf_llada2.py")
FIXTURES = os.path.join(ROOT, "tests", "data", "block")
# A short stand-in with Ling 2.0's markers (docs/model-formats.md, "Chat formats").
CHAT_TEMPLATE = "{{- '<role>HUMAN</role>' + m.content + '<|role_end|>' }}"


def make_hf_dir(d: str, st_dtype: str, hc: dict, seed: int) -> dict:
    sd = mlg.make_state_dict(hc, seed)
    os.makedirs(d, exist_ok=True)
    tok = ex.synthetic_tokenizer(hc["vocab_size"], "dream")
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
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"chat_template": CHAT_TEMPLATE}, f)
    names = sorted(sd)
    half = len(names) // 2
    for k, part in enumerate((names[:half], names[half:])):
        write_safetensors(os.path.join(d, f"model-0000{k + 1}-of-00002.safetensors"),
                          {n: sd[n] for n in part}, st_dtype)
    return tok


def convert(hf: str, out: str, dtype: str, extra=()) -> subprocess.CompletedProcess:
    cmd = [sys.executable, CONVERTER, hf, out, "--block-length", str(mlg.BLOCK_LENGTH),
           "--mask-token", "<|mask|>", "--dtype", dtype]
    return subprocess.run(cmd + list(extra), capture_output=True, text=True)


def check_same(path: str, fixture: str, st_dtype: str, tok: dict):
    got, want = gr.GGUFReader(path), gr.GGUFReader(os.path.join(FIXTURES, fixture))
    assert sorted(got.tensors) == sorted(want.tensors), fixture
    for name in want.tensors:
        if want.tensors[name].ggml_type == gw.GGML_F32 and st_dtype == "BF16":
            # norms, router and bias stay F32, holding the checkpoint's bf16 values
            assert np.array_equal(got.tensor(name),
                                  gw.roundtrip(want.tensor(name), gw.GGML_BF16)), name
        else:
            assert got.raw(name) == want.raw(name), (fixture, name)
    for key, value in want.kv.items():
        if key.startswith(("llada2.", "diffusion.")) or key == "general.architecture":
            assert got.kv.get(key) == value, (key, got.kv.get(key), value)
    assert got.kv["tokenizer.ggml.tokens"] == tok["tokens"]
    assert got.kv["tokenizer.ggml.mask_token_id"] == tok["mask"]
    assert got.kv["tokenizer.ggml.pre"] == "bailingmoe2"
    assert got.kv["tokenizer.chat_template"] == CHAT_TEMPLATE


def expect_refused(hf: str, out: str, needle: str, extra=()):
    r = convert(hf, os.path.join(out, "bad.gguf"), "f32", extra)
    assert r.returncode == 2 and needle in r.stderr, (needle, r.returncode, r.stderr)
    print(f"ok   bad input refused: {needle}")


def main():
    out = sys.argv[1]
    with open(os.path.join(FIXTURES, "llada2_golden.json")) as f:
        manifest = json.load(f)
    hc, seed = manifest["hf_config"], manifest["seed"]
    for st_dtype, dtype, fixture in (("F32", "f32", "llada2-tiny.gguf"),
                                     ("BF16", "bf16", "llada2-tiny-bf16.gguf")):
        hf = os.path.join(out, f"hf-llada2-{st_dtype}")
        tok = make_hf_dir(hf, st_dtype, hc, seed)
        path = os.path.join(out, f"llada2-{dtype}.gguf")
        r = convert(hf, path, dtype)
        assert r.returncode == 0, r.stderr
        check_same(path, fixture, st_dtype, tok)
        print(f"ok   llada2 {st_dtype} safetensors -> {dtype}: every tensor and key equals "
              f"{fixture}'s")
        if dtype == "f32":
            print(f"FILE llada2 {path}")
    # Bad inputs: one message each, exit status 2.
    hf = os.path.join(out, "hf-bad")
    expect_refused(os.path.join(out, "hf-llada2-F32"), out,
                   "does not divide max_position_embeddings", ["--block-length", "24"])
    for key, value, needle in (("rope_scaling", {"type": "yarn", "factor": 4.0}, "'rope_scaling'"),
                               ("use_qkv_bias", True, "'use_qkv_bias' = True is not supported"),
                               ("score_function", "softmax", "'score_function' = 'softmax'"),
                               ("n_group", 3, "'n_group' = 3 does not divide num_experts = 8")):
        make_hf_dir(hf, "F32", dict(hc, **{key: value}), seed)
        expect_refused(hf, out, needle)
    make_hf_dir(hf, "F32", hc, seed)
    with open(os.path.join(hf, "config.json"), "w") as f:
        json.dump({k: v for k, v in hc.items() if k != "num_shared_experts"}, f)
    expect_refused(hf, out, "config.json has no 'num_shared_experts'")
    make_hf_dir(hf, "F32", hc, seed)
    sd = mlg.make_state_dict(hc, seed)
    names = sorted(sd)
    shard, part = ((1, names[: len(names) // 2]) if "model.layers.1.mlp.gate.expert_bias" in
                   names[: len(names) // 2] else (2, names[len(names) // 2:]))
    write_safetensors(os.path.join(hf, f"model-0000{shard}-of-00002.safetensors"),
                      {n: sd[n] for n in part if not n.endswith("expert_bias")}, "F32")
    expect_refused(hf, out, "weight 'model.layers.1.mlp.gate.expert_bias' is missing")


if __name__ == "__main__":
    main()
