#!/usr/bin/env python3
"""Write tests/data/tokenizer_fixtures.json (text -> ids) for the C++ tokenizer tests."""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import bpe  # noqa: E402
import format as fmt  # noqa: E402
import suite  # noqa: E402

TEXTS = [
    "", " ", "a", "hello world", "Hello World!", "The color of Kavan is teal.",
    "What is Zorvan's city?", "Zormis's pet is owl. For Brira, the city is Hanoi.",
    "input: a c f d -> output: d f c a", "3 * 8 = 24. 24 + 17 = 41. #### 41",
    "Question: Tom has 5 boxes of apples.\nAnswer: 5 * 8 = 40. #### 40",
    "  leading and trailing spaces  ", "tabs\tand\nnewlines\n\n\nend", "line1\r\nline2",
    "it's we're they've I'm you'll he'd don't", "numbers 1234567 and 3.14159",
    "café é è ü ñ", "日本語のテキスト 日本", "emoji 🙂🚀 and 👍🏽", "Ünïcödé ẞ Ωμέγα",
    "<|bos|><|system|>\nFacts: The pet of Melbo is cat.<|eot|><|user|>\nWhat is the pet of Melbo?<|eot|><|assistant|>\n",
    "text with <|mask|><|mask|> inside", "<|eos|><|eos|><|pad|>", "a<|eot|>b", "<|user|>", "<|unknown|> not special",
    "punctuation!!! ??? ... ---", "x" * 40, "mixed CASE Words And 99 bottles", "\u00a0nbsp and \u200bzero width",
    " teal", " Accra", " 99 ##### 7",
    "Answer: 7 * 9 = 63. 63 - 4 = 59. #### 59", "x12 3.14 007 -5 (42)", "What is 105 + 17?",
]


def encode_all(tok):
    fx = []
    for t in TEXTS:
        ids = tok.encode(t)
        assert tok.decode(ids) == t, t
        fx.append({"text": t, "ids": ids})
    return fx


def main():
    argparse.ArgumentParser(description=__doc__.strip() + " Takes no arguments: it reads "
                            "tools/train/tokenizer.json.").parse_args()
    tok = bpe.Tokenizer.load(os.path.join(HERE, "tokenizer.json"))
    fx = encode_all(tok)
    # The same vocabulary and merges under every other pre-tokenizer bpe.py knows, so the C++
    # side is checked on the pattern a model trained with that variant would use.
    by_pre = {}
    for pre in sorted(bpe.PATTERNS):
        if pre != tok.pre:
            by_pre[pre] = encode_all(bpe.Tokenizer(dict(tok.d, pre=pre)))
    out = {"tokenizer": "tools/train/tokenizer.json (same vocab as models/tiny-llada.gguf)",
           "pre": tok.pre, "n_vocab": tok.n_vocab, "special": tok.special,
           "gen_length": fmt.GEN_LENGTH, "fixtures": fx, "fixtures_by_pre": by_pre}
    path = os.path.join(ROOT, "tests", "data", "tokenizer_fixtures.json")
    with open(path, "w") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
    print("wrote", len(fx), "fixtures to", path)


if __name__ == "__main__":
    main()
