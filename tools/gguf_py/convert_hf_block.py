#!/usr/bin/env python3
"""Convert a Hugging Face SDAR or Fast-dLLM v2 checkpoint (config.json, *.safetensors,
tokenizer.json) to a bicache GGUF file (docs/model-formats.md, "Block-diffusion architectures").

  /usr/bin/python3 tools/gguf_py/convert_hf_block.py HF_DIR OUT.gguf --arch sdar \
      --block-length 4 [--mask-token '<|MASK|>' | --mask-id N] [--dtype bf16]
  ... --arch fast-dllm-v2 --block-length 32 --sub-block-length 8 --mask-id 151665

Weights: the Qwen3 (sdar) / Qwen2 (fast-dllm-v2) HF names, model.embed_tokens,
model.layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj, self_attn.{q,k}_norm (sdar),
post_attention_layernorm, mlp.{gate,up,down}_proj}, model.norm, lm_head (absent or
tie_word_embeddings: tied). Safetensors F32 / F16 / BF16 are read with numpy alone.
Tokenizer: tokenizer.json's byte-level BPE vocabulary and merges, its added tokens as control
tokens, written with tokenizer.ggml.pre = qwen2; the chat template from tokenizer_config.json,
else chat_template.jinja.
Every missing or inconsistent input is one error naming it (exit status 2).
"""
from __future__ import annotations

import argparse
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_block as exb  # noqa: E402


class ConvertError(Exception):
    pass


_ST_DTYPES = {"F32": np.float32, "F16": np.float16}


def read_safetensors(path: str) -> dict:
    """name -> float32 array, from one .safetensors file (u64 header size, JSON header, data)."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ConvertError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ConvertError(f"{path}: header size {n} runs past the end of the file")
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt, shape, (b, e) = info["dtype"], info["shape"], info["data_offsets"]
        if e > len(data) or b > e:
            raise ConvertError(f"{path}: tensor '{name}' lies outside the data section")
        buf = data[b:e]
        if dt == "BF16":
            a = (np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif dt in _ST_DTYPES:
            a = np.frombuffer(buf, dtype=np.dtype(_ST_DTYPES[dt]).newbyteorder("<"))
        else:
            raise ConvertError(f"{path}: tensor '{name}' has dtype {dt}; supported: F32, F16, BF16")
        out[name] = a.astype(np.float32).reshape(shape)
    return out


def load_weights(hf_dir: str) -> dict:
    files = sorted(f for f in os.listdir(hf_dir) if f.endswith(".safetensors"))
    if not files:
        raise ConvertError(f"{hf_dir}: no .safetensors files")
    w = {}
    for f in files:
        w.update(read_safetensors(os.path.join(hf_dir, f)))
    return w


def map_state_dict(w: dict, arch: str, n_layer: int, tied: bool) -> dict:
    """HF Qwen names -> the names export_block.py takes."""
    def take(hf, ours, sd):
        if hf not in w:
            raise ConvertError(f"weight '{hf}' is missing")
        sd[ours] = w[hf]

    sd = {}
    take("model.embed_tokens.weight", "tok_emb.weight", sd)
    take("model.norm.weight", "norm.weight", sd)
    if not tied:
        take("lm_head.weight", "lm_head.weight", sd)
    for i in range(n_layer):
        h, p = f"model.layers.{i}.", f"layers.{i}."
        take(h + "input_layernorm.weight", p + "attn_norm.weight", sd)
        for proj, ours in (("q", "wq"), ("k", "wk"), ("v", "wv"), ("o", "wo")):
            take(h + f"self_attn.{proj}_proj.weight", p + f"{ours}.weight", sd)
        if arch == "fast-dllm-v2":
            for proj, ours in (("q", "wq"), ("k", "wk"), ("v", "wv")):
                take(h + f"self_attn.{proj}_proj.bias", p + f"{ours}.bias", sd)
        else:
            take(h + "self_attn.q_norm.weight", p + "q_norm.weight", sd)
            take(h + "self_attn.k_norm.weight", p + "k_norm.weight", sd)
        take(h + "post_attention_layernorm.weight", p + "ffn_norm.weight", sd)
        take(h + "mlp.gate_proj.weight", p + "w_gate.weight", sd)
        take(h + "mlp.up_proj.weight", p + "w_up.weight", sd)
        take(h + "mlp.down_proj.weight", p + "w_down.weight", sd)
    return sd


def read_config(hf_dir: str, args) -> tuple[dict, bool]:
    path = os.path.join(hf_dir, "config.json")
    if not os.path.exists(path):
        raise ConvertError(f"{path} is missing")
    with open(path) as f:
        hc = json.load(f)

    def need(key):
        if key not in hc:
            raise ConvertError(f"config.json has no '{key}'")
        return hc[key]

    d, nh = int(need("hidden_size")), int(need("num_attention_heads"))
    cfg = dict(n_layer=int(need("num_hidden_layers")), d_model=d, n_head=nh,
               n_kv_head=int(hc.get("num_key_value_heads", nh)),
               ff=int(need("intermediate_size")), vocab=int(need("vocab_size")),
               rope_base=float(hc.get("rope_theta", 10000.0)), eps=float(need("rms_norm_eps")),
               context_length=int(need("max_position_embeddings")),
               block_length=int(args.block_length))
    if hc.get("head_dim") and int(hc["head_dim"]) != d // nh:
        cfg["head_dim"] = int(hc["head_dim"])
    if cfg["block_length"] <= 0 or cfg["context_length"] % cfg["block_length"]:
        raise ConvertError(f"--block-length {cfg['block_length']} does not divide "
                           f"max_position_embeddings {cfg['context_length']}")
    if args.arch == "fast-dllm-v2":
        if not args.sub_block_length or cfg["block_length"] % args.sub_block_length:
            raise ConvertError("fast-dllm-v2 needs --sub-block-length dividing --block-length")
        cfg["sub_block_length"] = int(args.sub_block_length)
    return cfg, bool(hc.get("tie_word_embeddings", False))


def read_tokenizer(hf_dir: str, vocab: int, args, eos_id) -> dict:
    path = os.path.join(hf_dir, "tokenizer.json")
    if not os.path.exists(path):
        raise ConvertError(f"{path} is missing")
    with open(path) as f:
        tj = json.load(f)
    model = tj.get("model", {})
    if model.get("type") != "BPE":
        raise ConvertError(f"{path}: model type {model.get('type')!r}; only BPE is supported")
    ids = dict(model["vocab"])
    control = set()
    for t in tj.get("added_tokens", []):
        ids[t["content"]] = int(t["id"])
        if t.get("special", False):
            control.add(int(t["id"]))
    if max(ids.values()) >= vocab:
        raise ConvertError(f"{path}: token id {max(ids.values())} >= vocab_size {vocab}")
    tokens = [f"[PAD{i}]" for i in range(vocab)]
    types = [3] * vocab  # unused ids padding the embedding: control, never produced
    for s, i in ids.items():
        tokens[i] = s
        types[i] = 3 if i in control else 1
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    if args.mask_id is not None:
        mask = int(args.mask_id)
    elif args.mask_token is not None:
        if args.mask_token not in ids:
            raise ConvertError(f"mask token {args.mask_token!r} is not in {path}")
        mask = ids[args.mask_token]
    else:
        raise ConvertError("give the mask token: --mask-token TEXT or --mask-id N")
    if not 0 <= mask < vocab:
        raise ConvertError(f"mask id {mask} is outside the vocabulary of {vocab}")
    tok = {"tokens": tokens, "token_type": types, "merges": merges, "pre": "qwen2",
           "mask": mask, "bos": None, "eos": eos_id, "eot": eos_id, "pad": eos_id}
    tmpl = None
    tc = os.path.join(hf_dir, "tokenizer_config.json")
    if os.path.exists(tc):
        with open(tc) as f:
            tmpl = json.load(f).get("chat_template")
    # Newer transformers save the template beside the config instead (the Fast-dLLM v2 release
    # has only chat_template.jinja).
    jinja = os.path.join(hf_dir, "chat_template.jinja")
    if not isinstance(tmpl, str) and os.path.exists(jinja):
        with open(jinja, encoding="utf-8") as f:
            tmpl = f.read()
    if isinstance(tmpl, str):
        tok["chat_template"] = tmpl
    return tok


def convert(hf_dir: str, out: str, args) -> str:
    cfg, tied = read_config(hf_dir, args)
    with open(os.path.join(hf_dir, "config.json")) as f:
        eos = json.load(f).get("eos_token_id")
    if isinstance(eos, list):
        eos = eos[0] if eos else None
    tok = read_tokenizer(hf_dir, cfg["vocab"], args, eos)
    w = load_weights(hf_dir)
    tied = tied or "lm_head.weight" not in w
    sd = map_state_dict(w, args.arch, cfg["n_layer"], tied)
    return exb.export_block(sd, cfg, tok, out, args.arch, dtype=args.dtype,
                            name=os.path.basename(os.path.normpath(hf_dir)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("hf_dir")
    ap.add_argument("out")
    ap.add_argument("--arch", required=True, choices=exb.ARCHS)
    ap.add_argument("--block-length", type=int, required=True)
    ap.add_argument("--sub-block-length", type=int)
    ap.add_argument("--mask-token")
    ap.add_argument("--mask-id", type=int)
    ap.add_argument("--dtype", default="bf16", choices=("f32", "f16", "bf16", "q8_0"))
    args = ap.parse_args(argv)
    try:
        convert(args.hf_dir, args.out, args)
    except ConvertError as e:
        print(f"convert_hf_block: {e}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
