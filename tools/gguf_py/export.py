"""Export LLaDA / Dream style state dicts to llama.cpp-layout GGUF files.

Input state dict (HF/LLaMA convention, half-split "rotate_half" RoPE):
  tok_emb.weight [V,d]; layers.{i}.attn_norm.weight [d];
  layers.{i}.wq.weight [n_head*hd, d]; layers.{i}.wk.weight [n_kv*hd, d]; layers.{i}.wv.weight;
  layers.{i}.wo.weight [d, n_head*hd]; layers.{i}.ffn_norm.weight;
  layers.{i}.w_gate.weight [ff,d]; layers.{i}.w_up.weight [ff,d]; layers.{i}.w_down.weight [d,ff];
  norm.weight; lm_head.weight [V,d] (optional: absent => tied, no output.weight written);
  Dream only: layers.{i}.wq.bias / wk.bias / wv.bias.
config: n_layer, d_model, n_head, n_kv_head, ff, vocab, rope_base, eps, context_length.
"""
from __future__ import annotations

import os
import sys
from collections import Counter

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_writer as gw  # noqa: E402


# ---- helpers ---------------------------------------------------------------------------
def to_np(t) -> np.ndarray:
    if hasattr(t, "detach"):
        t = t.detach().cpu().float().numpy()
    return np.ascontiguousarray(np.asarray(t, dtype=np.float32))


def permute_qk(w: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp converter permutation: half-split RoPE rows -> adjacent-pair rows.
    Within each head, new row 2i = old row i, new row 2i+1 = old row i + hd/2."""
    rows = w.shape[0]
    hd = rows // n_heads
    return w.reshape(n_heads, 2, hd // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute_qk(w: np.ndarray, n_heads: int) -> np.ndarray:
    rows = w.shape[0]
    hd = rows // n_heads
    return w.reshape(n_heads, hd // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2 byte-level mapping: printable Latin-1 bytes map to themselves, the rest to 256+n."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + \
        list(range(0xAE, 0xFF + 1))
    m, n = {}, 0
    for b in range(256):
        if b in keep:
            m[b] = chr(b)
        else:
            m[b] = chr(256 + n)
            n += 1
    return m


_CORPUS = (
    "the quick brown fox jumps over the lazy dog. diffusion language models denoise a canvas of "
    "mask tokens in parallel; the model sees the whole sequence at once and there is no causal "
    "mask. a cache that is shared between requests can reuse the keys and values of the prompt "
    "when the attention is bidirectional only if the error it makes is small. the answer is in "
    "the tokens that are decoded first, then the rest of the answer follows in the next steps."
)

LLADA_CHAT_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + "
    "message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}"
)
DREAM_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def _train_merges(n_merges: int) -> list[tuple[str, str]]:
    """Tiny deterministic byte-level BPE training on a built-in paragraph."""
    b2u = bytes_to_unicode()
    words = Counter()
    for i, w in enumerate(_CORPUS.split(" ")):
        s = ("" if i == 0 else " ") + w
        words[tuple(b2u[b] for b in s.encode("utf-8"))] += 1
    merges = []
    while len(merges) < n_merges:
        pairs = Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        best = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        merges.append(best)
        nw = Counter()
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            nw[tuple(out)] += c
        words = nw
    return merges


def synthetic_tokenizer(vocab: int, arch: str = "llada") -> dict:
    """256 byte tokens (id == byte value, GPT-2 byte-to-unicode text), then BPE merge tokens,
    then special tokens; the mask token is the last id."""
    if arch == "dream":
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>"]
        sp = {"bos": None, "eos": "<|endoftext|>", "eot": "<|im_end|>", "pad": "<|endoftext|>",
              "mask": "<|mask|>"}
        pre, tmpl = "qwen2", DREAM_CHAT_TEMPLATE
    else:
        specials = ["<|startoftext|>", "<|endoftext|>", "<|start_header_id|>",
                    "<|end_header_id|>", "<|eot_id|>", "<|mdm_mask|>"]
        sp = {"bos": "<|startoftext|>", "eos": "<|endoftext|>", "eot": "<|eot_id|>",
              "pad": "<|endoftext|>", "mask": "<|mdm_mask|>"}
        pre, tmpl = "llama-bpe", LLADA_CHAT_TEMPLATE
    n_merge_tokens = vocab - 256 - len(specials)
    assert n_merge_tokens >= 0, "vocab too small for a synthetic tokenizer"
    b2u = bytes_to_unicode()
    tokens = [b2u[b] for b in range(256)]
    token_type = [1] * 256  # NORMAL
    merges = []
    seen = set(tokens)
    for a, b in _train_merges(n_merge_tokens):
        if a + b in seen:
            continue
        merges.append(f"{a} {b}")
        tokens.append(a + b)
        token_type.append(1)
        seen.add(a + b)
    k = 0
    while len(tokens) < vocab - len(specials):  # corpus exhausted: unused fillers
        tokens.append(f"<|reserved_{k}|>")
        token_type.append(3)
        k += 1
    for s in specials:
        tokens.append(s)
        token_type.append(3)  # CONTROL
    ids = {s: i for i, s in enumerate(tokens)}
    tok = {"tokens": tokens, "token_type": token_type, "merges": merges, "pre": pre,
           "chat_template": tmpl}
    for k2, v in sp.items():
        tok[k2] = None if v is None else ids[v]
    assert tok["mask"] == vocab - 1
    return tok


# Tokenizer-JSON "pre" names (tools/train/bpe.py) -> the name written to tokenizer.ggml.pre.
# llama.cpp knows the GPT-2 pre-tokenizer as "gpt-2" and refuses a file saying "gpt2"; bicache
# accepts both. Other names ("gpt2-digits", "llama-bpe", "qwen2", ...) are written as they are.
GGUF_PRE_NAMES = {"gpt2": "gpt-2"}


def gguf_pre_name(pre: str | None) -> str:
    pre = pre or "default"
    return GGUF_PRE_NAMES.get(pre, pre)


def _write_tokenizer(w: gw.GGUFWriter, tok: dict):
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_string("tokenizer.ggml.pre", gguf_pre_name(tok.get("pre")))
    w.add_array("tokenizer.ggml.tokens", tok["tokens"], gw.T_STRING)
    tt = tok.get("token_type") or [1] * len(tok["tokens"])
    w.add_array("tokenizer.ggml.token_type", tt, gw.T_INT32)
    w.add_array("tokenizer.ggml.merges", tok.get("merges") or [], gw.T_STRING)
    for key, name in (("bos", "bos_token_id"), ("eos", "eos_token_id"), ("eot", "eot_token_id"),
                      ("pad", "padding_token_id"), ("mask", "mask_token_id")):
        if tok.get(key) is not None:
            w.add_uint32(f"tokenizer.ggml.{name}", tok[key])
    if tok.get("add_bos") is not None:
        w.add_bool("tokenizer.ggml.add_bos_token", bool(tok["add_bos"]))
    if tok.get("chat_template"):
        w.add_string("tokenizer.chat_template", tok["chat_template"])


# ---- main export -----------------------------------------------------------------------
def _export(arch: str, state_dict, config: dict, tokenizer, path: str, dtype: str,
            name: str | None = None):
    sd = {k: to_np(v) for k, v in state_dict.items()}
    c = config
    L, d, nh, nkv, ff, V = (int(c["n_layer"]), int(c["d_model"]), int(c["n_head"]),
                            int(c["n_kv_head"]), int(c["ff"]), int(c["vocab"]))
    hd = d // nh if "head_dim" not in c else int(c["head_dim"])
    mtype = gw.GGML_TYPE_BY_NAME[dtype.lower()]
    w = gw.GGUFWriter()
    w.add_string("general.architecture", arch)
    w.add_string("general.name", name or c.get("name", f"{arch}-export"))
    w.add_uint32("general.file_type", gw.FILE_TYPE[mtype])
    w.add_uint32(f"{arch}.context_length", int(c.get("context_length", 4096)))
    w.add_uint32(f"{arch}.embedding_length", d)
    w.add_uint32(f"{arch}.block_count", L)
    w.add_uint32(f"{arch}.feed_forward_length", ff)
    w.add_uint32(f"{arch}.attention.head_count", nh)
    w.add_uint32(f"{arch}.attention.head_count_kv", nkv)
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", float(c["eps"]))
    w.add_float32(f"{arch}.rope.freq_base", float(c.get("rope_base", 10000.0)))
    w.add_uint32(f"{arch}.rope.dimension_count", hd)
    w.add_bool(f"{arch}.attention.causal", False)
    w.add_uint32(f"{arch}.vocab_size", V)
    if arch == "llada":
        w.add_bool("diffusion.shift_logits", False)
    _write_tokenizer(w, tokenizer if tokenizer is not None else synthetic_tokenizer(V, arch))

    def chk(key, shape):
        assert sd[key].shape == tuple(shape), f"{key}: {sd[key].shape} != {shape}"
        return sd[key]

    w.add_tensor("token_embd.weight", chk("tok_emb.weight", (V, d)), mtype)
    w.add_tensor("output_norm.weight", chk("norm.weight", (d,)), gw.GGML_F32)
    if "lm_head.weight" in sd:
        w.add_tensor("output.weight", chk("lm_head.weight", (V, d)), mtype)
    for i in range(L):
        p, b = f"layers.{i}.", f"blk.{i}."
        wq = chk(p + "wq.weight", (nh * hd, d))
        wk = chk(p + "wk.weight", (nkv * hd, d))
        wv = chk(p + "wv.weight", (nkv * hd, d))
        if arch == "llada":
            wq, wk = permute_qk(wq, nh), permute_qk(wk, nkv)
        w.add_tensor(b + "attn_norm.weight", chk(p + "attn_norm.weight", (d,)), gw.GGML_F32)
        w.add_tensor(b + "attn_q.weight", wq, mtype)
        w.add_tensor(b + "attn_k.weight", wk, mtype)
        w.add_tensor(b + "attn_v.weight", wv, mtype)
        if arch == "dream":
            w.add_tensor(b + "attn_q.bias", chk(p + "wq.bias", (nh * hd,)), gw.GGML_F32)
            w.add_tensor(b + "attn_k.bias", chk(p + "wk.bias", (nkv * hd,)), gw.GGML_F32)
            w.add_tensor(b + "attn_v.bias", chk(p + "wv.bias", (nkv * hd,)), gw.GGML_F32)
        w.add_tensor(b + "attn_output.weight", chk(p + "wo.weight", (d, nh * hd)), mtype)
        w.add_tensor(b + "ffn_norm.weight", chk(p + "ffn_norm.weight", (d,)), gw.GGML_F32)
        w.add_tensor(b + "ffn_gate.weight", chk(p + "w_gate.weight", (ff, d)), mtype)
        w.add_tensor(b + "ffn_up.weight", chk(p + "w_up.weight", (ff, d)), mtype)
        w.add_tensor(b + "ffn_down.weight", chk(p + "w_down.weight", (d, ff)), mtype)
    w.write(path)
    return path


def export_llada(state_dict, config: dict, tokenizer: dict | None, path: str, dtype: str = "bf16",
                 name: str | None = None):
    return _export("llada", state_dict, config, tokenizer, path, dtype, name)


def export_dream(state_dict, config: dict, tokenizer: dict | None, path: str, dtype: str = "bf16",
                 name: str | None = None):
    return _export("dream", state_dict, config, tokenizer, path, dtype, name)


MATRIX_SUFFIXES = ("wq.weight", "wk.weight", "wv.weight", "wo.weight", "w_gate.weight",
                   "w_up.weight", "w_down.weight")


def roundtrip_state_dict(state_dict, dtype: str, matrix_suffixes=MATRIX_SUFFIXES) -> dict:
    """The weights (HF layout, float32) a reader of an exported file of `dtype` sees: the
    embeddings and the tensors named by `matrix_suffixes` in `dtype`, the rest (norms) as F32.
    Exact, because the Q/K permutation only reorders rows and ggml blocks lie within a row."""
    mtype = gw.GGML_TYPE_BY_NAME[dtype.lower()]
    out = {}
    for k, v in state_dict.items():
        v = to_np(v)
        if k in ("tok_emb.weight", "lm_head.weight") or k.endswith(matrix_suffixes):
            v = gw.roundtrip(v, mtype)
        out[k] = v
    return out
