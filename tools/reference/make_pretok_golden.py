#!/usr/bin/env python3
"""Expected pre-tokenizer pieces of llama.cpp's `bailingmoe` pre-tokenizer, in tests/data/.

Run:  /usr/bin/python3 tools/reference/make_pretok_golden.py [out.json]
      (default out: tests/data/pretok_bailingmoe.json; needs the `regex` module, python3-regex)

The pattern is the one llama.cpp compiles for LLAMA_VOCAB_PRE_TYPE_BAILINGMOE, the type it gives
`tokenizer.ggml.pre` = "bailingmoe" (Ling 1.x), "bailingmoe2" (Ling 2.0 / LLaDA2.x) and
"llada-moe" (ggml-org/llama.cpp src/llama-vocab.cpp: the llm_tokenizer_bpe constructor's case
LLAMA_VOCAB_PRE_TYPE_BAILINGMOE, and llama_vocab::impl::load's tokenizer_pre chain; read at commit
00ad355e009e83abf98f96a6ded7193b95763681). It is written here from that source, not from the
engine's constant; tests/tokenizer_pretok_test.cpp checks that the engine's pattern is this same
string and that the engine's split (PCRE2) gives these pieces.

The pieces come from Python's `regex` module: regex.findall over the text, which (like the engine
and llama.cpp) takes matches left to right, trying the alternatives in order at each position.
Checks made before writing:
  * the pieces cover every text exactly (no character is left unmatched);
  * llama.cpp's pattern with the possessive quantifiers (`?+`, `++`) of the tokenizer.json
    original put back (llama.cpp made them greedy) gives the same pieces on every text;
  * the tokenizer.json original itself, and the Qwen2 pattern (LLAMA_VOCAB_PRE_TYPE_QWEN2's
    tokenizer.json original), give the same pieces on every text but the one with a long s after
    an apostrophe: their case-insensitive contraction groups fold U+017F to 's', llama.cpp's
    explicit [sS] class does not. The fixture marks that case ("case_fold_differs").
"""
from __future__ import annotations

import json
import os
import sys

import regex

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))

# llama.cpp's BAILINGMOE pattern (greedy form), as a C/Python string without the C escaping.
BAILINGMOE = (r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
              r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+")
# The same with the possessive quantifiers of the tokenizer.json original put back.
BAILINGMOE_POSSESSIVE = (r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}"
                         r"| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+")
# The tokenizer.json original quoted beside it in llama.cpp (case-insensitive group, possessive).
BAILINGMOE_ORIGINAL = (r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}"
                       r"| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
         r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# (what it exercises, text). Only long-standing Unicode characters, so the Unicode tables of
# PCRE2 and of this `regex` build agree on every class used.
CASES = [
    ("digits: one piece per digit, a space before a number stands alone",
     "Total: 12345 apples, 3.14 and 1,000,000!"),
    ("contractions: any case, only after an apostrophe; others are punctuation + letters",
     "I'VE we'll they're it's don't Y'ALL O'Neil 'tis we'Re rock'n'roll"),
    ("CJK and full-width punctuation",
     "你好，世界！こんにちは 세계 123漢字"),
    ("newlines: a whitespace run ending in a newline is one piece; CRLF",
     "line1\n\nline2\r\n  indented\n\t\ttab\n \nend  \n\n"),
    ("punctuation runs take an optional leading space and the newlines after them",
     "wait...!!! ?? --> (a+b)*c;\n\nx==y\n"),
    ("leading and trailing spaces",
     "   leading and trailing   "),
    ("one leading non-letter joins a letter run; accents; non-breaking and ideographic spaces",
     "  $hello café naïve\u00a0nbsp\u3000全角 #tag @user"),
    ("code",
     "def f(x):\n    return x**2  # square\n"),
    ("emoji and combining marks (not letters)",
     "ok 👍🏽 done e\u0301te"),
    ("long s after an apostrophe: not a contraction here (explicit [sS])",
     "it'ſt"),
]


def split(pattern: str, text: str) -> list[str]:
    return [m.group(0) for m in regex.finditer(pattern, text)]


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "data",
                                                             "pretok_bailingmoe.json")
    cases = []
    for what, text in CASES:
        pieces = split(BAILINGMOE, text)
        if "".join(pieces) != text:
            raise SystemExit(f"pieces do not cover {text!r}: {pieces!r}")
        if split(BAILINGMOE_POSSESSIVE, text) != pieces:
            raise SystemExit(f"greedy and possessive forms differ on {text!r}")
        fold = "'\u017f" in text
        for name, other in (("tokenizer.json original", BAILINGMOE_ORIGINAL), ("qwen2", QWEN2)):
            if (split(other, text) != pieces) != fold:
                raise SystemExit(f"unexpected {name} (dis)agreement on {text!r}: "
                                 f"{split(other, text)!r}")
        cases.append({"what": what, "text": text, "pieces": pieces, "case_fold_differs": fold})
    doc = {
        "generator": "tools/reference/make_pretok_golden.py",
        "pre": ["bailingmoe", "bailingmoe2", "llada-moe"],
        "pattern": BAILINGMOE,
        "source": "ggml-org/llama.cpp src/llama-vocab.cpp @ 00ad355e009e83abf98f96a6ded7193b95763681, "
                  "llm_tokenizer_bpe, case LLAMA_VOCAB_PRE_TYPE_BAILINGMOE",
        "cases": cases,
    }
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {out}")


if __name__ == "__main__":
    main()
