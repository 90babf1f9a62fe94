#!/usr/bin/env bash
# tools/train/probe_numbers.py and fourier.py (train.py --fourier): the number tokens fixed (" 0" .. " 99", one token each), its rows
# (the two result tokens of every question marked, and they are x op y), the Fourier table (an
# output head made of it reads every number back, and it encodes x + y as a rotation of x), the
# fixed dimensions surviving an optimizer step with weight decay, its scoring, bad flags, --score, and
# a short run end to end.
# Usage: probe_numbers.sh <bicache binary> <source dir>
set -euo pipefail
SRC="$2"
PY=/usr/bin/python3
export OMP_NUM_THREADS=1

"$PY" - "$SRC" <<'EOF'
import random
import re
import sys
sys.path.insert(0, sys.argv[1] + "/tools/train")
import torch
import bpe
import fourier
import probe_numbers as pn
from model import LLaDA, default_config

tok = bpe.Tokenizer.load(sys.argv[1] + "/tools/train/tokenizer.json")
nums = fourier.number_ids(tok)
assert len(set(nums.tolist())) == 100 and all(tok.decode([int(nums[n])]) == " %d" % n for n in range(100))
print("ok   number_ids: 100 distinct tokens, each decoding to its number")

# row: two results per question, each the value of the question's x op y.
rng = random.Random(5)
for _ in range(5):
    ids, ans, res = pn.row(tok, rng, 12, False)
    text = tok.decode(ids)
    qs = re.findall(r"What is (\d+) ([+-]) (\d+)\?", text)
    got = [int(tok.decode([i])) for i, r in zip(ids, res) if r]
    want = [int(x) + int(y) if op == "+" else int(x) - int(y) for x, op, y in qs]
    assert len(qs) == 12 and got == [w for w in want for _ in range(2)], (got, want)
    assert all(a for a, r in zip(ans, res) if r)
print("ok   row: every question's two result tokens are marked, and they are x op y")

# The table: read back by its own rows (argmax of dot products) it gives every number; the entries
# of x + y are those of x rotated by y's angles, the relation the model can compute.
for k in (1, 4, 12):
    tab = fourier.fourier_table(k, 0.1)
    assert (tab @ tab.T).argmax(1).tolist() == list(range(100)), k
tab = fourier.fourier_table(12, 1.0)
c, s = tab[:, :12], tab[:, 12:]
for x, y in ((3, 4), (63, 13), (80, 19)):
    assert torch.allclose(c[x + y], c[x] * c[y] - s[x] * s[y], atol=1e-5)
    assert torch.allclose(s[x + y], s[x] * c[y] + c[x] * s[y], atol=1e-5)
print("ok   fourier_table: decodable by its own rows; x + y is x rotated by y")

# FixedNumberDims: after an AdamW step with weight decay the dims are the table again, the rest moved.
cfg = default_config(tok.n_vocab)
cfg.update(n_layer=1, d_model=32, n_head=2, n_kv_head=2, ff=64)
model = LLaDA(cfg)
fixed = fourier.FixedNumberDims(model, nums, 4, 0.1)
fixed.apply()
before = model.tok_emb.weight.detach().clone()
opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
ids = torch.tensor([nums[:8].tolist() + [5, 6]])
model(ids).pow(2).mean().backward()
opt.step()
fixed.apply()
w = model.tok_emb.weight
assert torch.equal(w[nums, 24:], fourier.fourier_table(4, 0.1)) and torch.equal(model.lm_head.weight[nums, 24:], fourier.fourier_table(4, 0.1))
assert float(w[:, 24:].abs().sum()) == float(fourier.fourier_table(4, 0.1).abs().sum())
assert not torch.equal(w[:, :24], before[:, :24])
print("ok   FixedNumberDims: the fixed columns survive a step with weight decay; the others train")


class Oracle(torch.nn.Module):
    """Logits that put the true token (or its successor) at every selected position."""

    def __init__(self, off):
        super().__init__()
        self.off = off

    def forward(self, ids, key_mask=None, select=None):
        n = int(select.sum())
        out = torch.zeros(n, tok.n_vocab)
        out[torch.arange(n), (self.gold[select] + self.off) % tok.n_vocab] = 1.0
        return out


rows = [pn.row(tok, random.Random(9), 16, True) for _ in range(3)]
ids, _, _, _ = pn.pad_rows(tok, rows)
for off, want in ((0, 1.0), (1, 0.0)):
    o = Oracle(off)
    o.gold = ids
    assert pn.score(o, tok, rows) == want, off
print("ok   score: right results 1.0, shifted ones 0.0")
EOF

for bad in "--fourier 17|invalid choice" "--fourier 8 --d 16|--fourier 8 needs 2K = 16 dimensions, fewer than d_model 16" \
           "--minutes 0|--minutes must be > 0" "--amp 0|argument --amp: expected a positive number" "--q 0,3|expected 1 <= LO <= HI"; do
  flag=${bad%%|*}; want=${bad#*|}
  # shellcheck disable=SC2086
  if err=$(cd "$SRC/tools/train" && "$PY" probe_numbers.py $flag 2>&1); then
    echo "FAIL probe_numbers.py $flag was accepted"; exit 1
  fi
  grep -qF -- "$want" <<<"$err" || { echo "FAIL probe_numbers.py $flag: $err"; exit 1; }
done
echo "ok   bad --fourier / --d / --minutes / --q / --amp values are refused with the reason"

# --score: a full-size model scored only; the committed GGUF and the same weights as a train.py
# checkpoint score alike; a missing file and a file that is no train.py checkpoint are refused by name.
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$PY" "$SRC/tools/train/import_gguf.py" --gguf "$SRC/models/tiny-llada.gguf" --out "$TMP/committed.pt" >/dev/null
line="results right: train facts [01]\.[0-9]*, held-out facts [01]\.[0-9]*"
g=$("$PY" "$SRC/tools/train/probe_numbers.py" --score "$SRC/models/tiny-llada.gguf" 2>&1) || true
p=$("$PY" "$SRC/tools/train/probe_numbers.py" --score "$TMP/committed.pt" 2>&1) || true
grep -q "$line" <<<"$g" && [ "$(grep -o "$line" <<<"$g")" = "$(grep -o "$line" <<<"$p")" ] \
  || { echo "FAIL --score: GGUF '$g', checkpoint '$p'"; exit 1; }
if err=$("$PY" "$SRC/tools/train/probe_numbers.py" --score "$TMP/missing.gguf" 2>&1); then
  echo "FAIL --score of a missing file was accepted"; exit 1
fi
grep -qF -- "--score $TMP/missing.gguf: " <<<"$err" || { echo "FAIL --score missing file: $err"; exit 1; }
"$PY" -c 'import sys, torch; torch.save({"tok_emb.weight": torch.zeros(2, 2)}, sys.argv[1])' "$TMP/state.pt"
if err=$("$PY" "$SRC/tools/train/probe_numbers.py" --score "$TMP/state.pt" 2>&1); then
  echo "FAIL --score of a bare state_dict was accepted"; exit 1
fi
grep -qF -- "--score $TMP/state.pt: not a train.py checkpoint (no 'model' entry)" <<<"$err" \
  || { echo "FAIL --score bare state_dict: $err"; exit 1; }
echo "ok   --score: the committed GGUF and its weights as a checkpoint score alike ($(grep -o "$line" <<<"$g")); a missing file and a bare state_dict are refused"

out=$(cd "$SRC/tools/train" && timeout 300 "$PY" probe_numbers.py --layers 1 --d 32 --ff 64 --heads 2 \
  --fourier 4 --minutes 0.05 --batch 4 --eval-every 100 --precision f32 2>&1)
grep -q "results right at start: train facts 0\.[0-9]*, held-out facts 0\.[0-9]*" <<<"$out" \
  && grep -q "^.* step [1-9][0-9]* (.*loss [0-9.]* results right" <<<"$out" \
  || { echo "FAIL end-to-end run: $out"; exit 1; }
echo "ok   a short probe run: $(tail -1 <<<"$out" | cut -c10-)"
