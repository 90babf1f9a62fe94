#!/usr/bin/env python3
"""Byte-level BPE tokenizer (GPT-2 style) for the embedded tiny DLM.

Layout of the vocabulary (ids):
  0..255            one token per byte; token string = GPT-2 bytes_to_unicode()[byte]
  256..256+M-1      merges in rank order (token string = concatenation of the pair)
  256+M..V-1        control tokens (type 3), never produced by merges, matched
                    as whole strings in text before pre-tokenization:
                    <|pad|> <|bos|> <|eos|> <|eot|> <|mask|> <|system|> <|user|> <|assistant|>

Encoding = standard GPT-2 BPE:
  1. split the text on control-token strings (leftmost match, longest first);
  2. pre-tokenize each remaining chunk with the GPT-2 regex
     's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
     (JSON "pre": "gpt2"), or with " ?\\p{N}" in place of " ?\\p{N}+" ("gpt2-digits": one
     digit per piece); the merges are always learnt under the first.
  3. map each pre-token's UTF-8 bytes through bytes_to_unicode;
  4. repeatedly merge the adjacent pair with the lowest merge rank (all its
     occurrences, left to right) until no pair has a rank;
  5. look the resulting strings up in the vocabulary.

JSON file: {"model": "gpt2", "pre": "gpt2", "tokens": [...], "token_types": [...],
            "merges": ["a b", ...], "special": {"<|pad|>": id, ...}}
"""
import argparse
import collections
import json
import sys

import regex as re

GPT2_PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# "gpt2-digits": the GPT-2 pattern with every digit its own piece (a leading space stays attached
# to the first digit), so " 63" is " 6" + "3" and arithmetic works on digits instead of on one
# token per number. Same vocabulary and merges as "gpt2"; merges that join digits never apply.
GPT2_DIGITS_PAT = GPT2_PAT.replace(r" ?\p{N}+", r" ?\p{N}", 1)
assert GPT2_DIGITS_PAT != GPT2_PAT
PATTERNS = {"gpt2": GPT2_PAT, "gpt2-digits": GPT2_DIGITS_PAT}
SPECIALS = ["<|pad|>", "<|bos|>", "<|eos|>", "<|eot|>", "<|mask|>", "<|system|>", "<|user|>", "<|assistant|>"]


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


BYTE_ENC = bytes_to_unicode()
BYTE_DEC = {v: k for k, v in BYTE_ENC.items()}
_compiled = {name: re.compile(p) for name, p in PATTERNS.items()}


def pretokenize(text, pre="gpt2"):
    return _compiled[pre].findall(text)


def train_bpe(texts, vocab_size=2048, min_freq=2):
    counts = collections.Counter()
    for t in texts:
        for chunk in split_specials(t, SPECIALS):
            if chunk in SPECIALS:
                continue
            for p in pretokenize(chunk):
                counts["".join(BYTE_ENC[b] for b in p.encode("utf-8"))] += 1
    words = [list(w) for w in counts]
    freqs = [counts[w] for w in counts]
    n_merges = vocab_size - 256 - len(SPECIALS)
    merges = []
    pair_counts = collections.Counter()
    where = collections.defaultdict(set)
    for i, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pair_counts[(a, b)] += freqs[i]
            where[(a, b)].add(i)
    while len(merges) < n_merges and pair_counts:
        # best pair: highest count, ties broken lexicographically (deterministic)
        best = max(pair_counts.items(), key=lambda kv: (kv[1], kv[0]))
        (a, b), c = best
        if c < min_freq:
            break
        merges.append((a, b))
        new = a + b
        for i in list(where[(a, b)]):
            w = words[i]
            f = freqs[i]
            for x, y in zip(w, w[1:]):
                pair_counts[(x, y)] -= f
                if pair_counts[(x, y)] <= 0:
                    del pair_counts[(x, y)]
            out = []
            j = 0
            while j < len(w):
                if j < len(w) - 1 and w[j] == a and w[j + 1] == b:
                    out.append(new)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
            words[i] = out
            for x, y in zip(out, out[1:]):
                pair_counts[(x, y)] += f
                where[(x, y)].add(i)
        where.pop((a, b), None)
    tokens = [BYTE_ENC[b] for b in range(256)] + [a + b for a, b in merges]
    # a merge result could (in principle) duplicate a token string; keep unique
    assert len(set(tokens)) == len(tokens), "duplicate token string"
    types = [1] * len(tokens)
    special = {}
    for s in SPECIALS:
        special[s] = len(tokens)
        tokens.append(s)
        types.append(3)
    return {"model": "gpt2", "pre": "gpt2", "tokens": tokens, "token_types": types,
            "merges": ["%s %s" % m for m in merges], "special": special}


def split_specials(text, specials):
    if not specials:
        return [text]
    pat = "(" + "|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True)) + ")"
    return [c for c in re.split(pat, text) if c != ""]


class Tokenizer:
    def __init__(self, d):
        self.d = d
        self.tokens = d["tokens"]
        self.vocab = {t: i for i, t in enumerate(self.tokens)}
        self.ranks = {tuple(m.split(" ")): i for i, m in enumerate(d["merges"])}
        self.special = d["special"]
        self.specials = list(self.special)
        self.pre = d.get("pre", "gpt2")
        if self.pre not in PATTERNS:
            raise ValueError("tokenizer pre-tokenizer %r is not one of %s" % (self.pre, sorted(PATTERNS)))
        self.cache = {}
        for k, v in self.special.items():
            setattr(self, k.strip("<|>") + "_id", v)

    @classmethod
    def load(cls, path):
        with open(path) as f:
            return cls(json.load(f))

    @property
    def n_vocab(self):
        return len(self.tokens)

    def _bpe(self, word):
        if word in self.cache:
            return self.cache[word]
        w = list(word)
        while len(w) > 1:
            best = None
            br = None
            for p in zip(w, w[1:]):
                r = self.ranks.get(p)
                if r is not None and (br is None or r < br):
                    br, best = r, p
            if best is None:
                break
            a, b = best
            out = []
            j = 0
            while j < len(w):
                if j < len(w) - 1 and w[j] == a and w[j + 1] == b:
                    out.append(a + b)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
            w = out
        ids = [self.vocab[x] for x in w]
        self.cache[word] = ids
        return ids

    def encode(self, text, allow_special=True):
        ids = []
        chunks = split_specials(text, self.specials) if allow_special else [text]
        for c in chunks:
            if allow_special and c in self.special:
                ids.append(self.special[c])
                continue
            for p in pretokenize(c, self.pre):
                ids += self._bpe("".join(BYTE_ENC[b] for b in p.encode("utf-8")))
        return ids

    def decode(self, ids, skip_special=False):
        out = bytearray()
        for i in ids:
            t = self.tokens[i]
            if self.d["token_types"][i] == 3:
                if not skip_special:
                    out += t.encode("utf-8")
            else:
                out += bytes(BYTE_DEC[ch] for ch in t)
        return out.decode("utf-8", errors="replace")


def corpus_texts(n_groups=6000, seed=99):
    """Text the tokenizer is trained on: suite prefixes/prompts/answers."""
    import random
    import suite
    import format as fmt
    rng = random.Random(seed)
    ts = suite.TrainStream(seed)
    texts = []
    for g in range(n_groups):
        fam = suite.FAMILIES[g % 3]
        p, qs = ts.group(fam, 4, facts=(1, 32), n_preamble=rng.choice([0, 0, 1, 3]))
        texts.append(p)
        for q, a in qs:
            texts.append(q)
            texts.append(fmt.answer_text(a))
            texts.append("\n" + fmt.answer_text(a))
    # make sure every name/value (with and without a leading space) is covered
    for w in suite.NAMES + suite.VALUES + suite.ATTR_NAMES:
        texts += [" " + w] * 5 + [w] * 3
    for n in range(0, 100):
        texts += [" %d" % n] * 3
    return texts


def coverage_problems(tok):
    """What the suite needs of a tokenizer and `tok` lacks: every entity name and value, and every
    number 0-99, one token after a space (docs/model.md). Empty when it has all of it."""
    import suite
    bad = [w for w in suite.NAMES + suite.VALUES if len(tok.encode(" " + w)) != 1]
    bad += [" %d" % n for n in range(100) if len(tok.encode(" %d" % n)) != 1]
    return bad


def main():
    ap = argparse.ArgumentParser(
        description="Learn the byte-level BPE tokenizer on the suite's text, or --check an existing one.")
    ap.add_argument("--out", default="tools/train/tokenizer.json")
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--pre", default="gpt2", choices=sorted(PATTERNS),
                    help="pre-tokenizer written to the JSON (the merges are always learnt under gpt2's "
                         "pattern, so every choice has the same vocabulary)")
    ap.add_argument("--check", metavar="FILE",
                    help="learn nothing: check that FILE covers the suite (every name, value and number "
                         "0-99 one token) and exit 1 if not")
    args = ap.parse_args()
    if args.check:
        try:
            tok = Tokenizer.load(args.check)
        except (OSError, ValueError, KeyError) as e:
            sys.exit("bpe.py: cannot read tokenizer %s: %s" % (args.check, e))
        bad = coverage_problems(tok)
        if bad:
            sys.exit("bpe.py: %s does not cover the suite: %d names/values/numbers are not one token, e.g. %r"
                     % (args.check, len(bad), bad[:5]))
        print("bpe.py: %s covers the suite (vocab %d)" % (args.check, tok.n_vocab))
        return
    tok_d = train_bpe(corpus_texts(), args.vocab)
    tok = Tokenizer(tok_d)
    bad = coverage_problems(tok)
    if bad:
        sys.exit("bpe.py: a vocabulary of %d leaves %d names/values/numbers in several tokens (e.g. %r); "
                 "nothing written" % (args.vocab, len(bad), bad[:5]))
    with open(args.out, "w") as f:
        json.dump(dict(tok_d, pre=args.pre), f, ensure_ascii=False)
    print("vocab", tok.n_vocab, "merges", len(tok_d["merges"]), "-> " + args.out)
    print("specials", tok_d["special"], "pre", args.pre)


if __name__ == "__main__":
    main()
