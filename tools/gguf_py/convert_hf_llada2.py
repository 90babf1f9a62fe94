#!/usr/bin/env python3
"""Convert a Hugging Face LLaDA2.x checkpoint (LLaDA2MoeModelLM, BailingMoeV2 weights: config.json,
*.safetensors, tokenizer.json) to a bicache GGUF file of architecture llada2
(docs/model-formats.md, "llada2").

  /usr/bin/python3 tools/gguf_py/convert_hf_llada2.py HF_DIR OUT.gguf --block-length 32 \
      [--mask-token '<|mask|>' | --mask-id 156895] [--dtype bf16]

Weights: the checkpoint's own names (tools/gguf_py/export_llada2.py lists them), experts
stacked into 3-D tensors, the router and its expert_bias kept F32. Safetensors F32 / F16 / BF16
are read with numpy alone. Tokenizer: tokenizer.json's byte-level BPE, its added tokens as control
tokens, tokenizer.ggml.pre = bailingmoe2 (llama.cpp's name for Ling 2.0's pre-tokenizer); the
chat template from tokenizer_config.json, else chat_template.jinja. What the engine does not
compute is refused by name: rope_scaling, Q/K/V or output biases, no Q/K norm, a score function
other than sigmoid, multi-token-prediction layers, norm_head.
Every missing or inconsistent input is one error naming it (exit status 2).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_llada2 as exl  # noqa: E402
from convert_hf_block import ConvertError, load_weights, read_tokenizer  # noqa: E402

REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
            "intermediate_size", "vocab_size", "rms_norm_eps", "max_position_embeddings",
            "num_experts", "num_experts_per_tok", "moe_intermediate_size", "num_shared_experts",
            "first_k_dense_replace")


def read_config(hf_dir: str, block_length: int) -> dict:
    path = os.path.join(hf_dir, "config.json")
    if not os.path.exists(path):
        raise ConvertError(f"{path} is missing")
    with open(path) as f:
        hc = json.load(f)
    for key in REQUIRED:
        if key not in hc:
            raise ConvertError(f"config.json has no '{key}'")
    refuse = {
        "rope_scaling": hc.get("rope_scaling") not in (None, {}),
        "use_qkv_bias": bool(hc.get("use_qkv_bias", False)),
        "use_bias": bool(hc.get("use_bias", False)),
        "norm_head": bool(hc.get("norm_head", False)),
        "num_nextn_predict_layers": int(hc.get("num_nextn_predict_layers") or 0) > 0,
        "use_qk_norm": not hc.get("use_qk_norm", True),
        "score_function": hc.get("score_function", "sigmoid") != "sigmoid",
    }
    for key, bad in refuse.items():
        if bad:
            raise ConvertError(f"config.json '{key}' = {hc.get(key)!r} is not supported by the "
                               "llada2 architecture (docs/model-formats.md)")
    E, G = int(hc["num_experts"]), int(hc.get("n_group", 1))
    if G < 1 or E % G:
        raise ConvertError(f"config.json 'n_group' = {G} does not divide num_experts = {E}")
    if block_length <= 0 or int(hc["max_position_embeddings"]) % block_length:
        raise ConvertError(f"--block-length {block_length} does not divide "
                           f"max_position_embeddings {hc['max_position_embeddings']}")
    return hc


def check_weights(w: dict, hc: dict):
    """Every tensor export_llada2 reads is present (one error naming the first missing)."""
    need = ["model.word_embeddings.weight", "model.norm.weight", "lm_head.weight"]
    for i in range(int(hc["num_hidden_layers"])):
        h = f"model.layers.{i}."
        need += [h + "input_layernorm.weight", h + "attention.query_key_value.weight",
                 h + "attention.query_layernorm.weight", h + "attention.key_layernorm.weight",
                 h + "attention.dense.weight", h + "post_attention_layernorm.weight"]
        m = h + "mlp."
        if i < int(hc["first_k_dense_replace"]):
            need += [m + f"{p}_proj.weight" for p in ("gate", "up", "down")]
            continue
        need += [m + "gate.weight", m + "gate.expert_bias"]
        need += [m + f"experts.{e}.{p}_proj.weight" for e in range(int(hc["num_experts"]))
                 for p in ("gate", "up", "down")]
        need += [m + f"shared_experts.{p}_proj.weight" for p in ("gate", "up", "down")]
    for name in need:
        if name not in w:
            raise ConvertError(f"weight '{name}' is missing")


def convert(hf_dir: str, out: str, args) -> str:
    hc = read_config(hf_dir, args.block_length)
    eos = hc.get("eos_token_id")
    if isinstance(eos, list):
        eos = eos[0] if eos else None
    tok = read_tokenizer(hf_dir, int(hc["vocab_size"]), args, eos)
    tok["pre"] = "bailingmoe2"
    w = load_weights(hf_dir)
    if "lm_head.weight" not in w and hc.get("tie_word_embeddings", False):
        w["lm_head.weight"] = w["model.word_embeddings.weight"]  # bailingmoe2 needs output.weight
    check_weights(w, hc)
    return exl.export_llada2(w, hc, tok, out, args.block_length, dtype=args.dtype,
                             name=os.path.basename(os.path.normpath(hf_dir)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("hf_dir")
    ap.add_argument("out")
    ap.add_argument("--block-length", type=int, required=True)
    ap.add_argument("--mask-token")
    ap.add_argument("--mask-id", type=int)
    ap.add_argument("--dtype", default="bf16", choices=("f32", "f16", "bf16", "q8_0"))
    args = ap.parse_args(argv)
    try:
        convert(args.hf_dir, args.out, args)
    except ConvertError as e:
        print(f"convert_hf_llada2: {e}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
