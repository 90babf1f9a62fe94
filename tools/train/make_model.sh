#!/usr/bin/env bash
# Regenerate the embedded tiny DLM: held-out suite, tokenizer, fixtures, training
# (resumes from tools/train/ckpt/latest.pt if present) and GGUF export.
#
#   tools/train/make_model.sh [MINUTES [MINUTES4 [MINUTES5 [MINUTES6 [MINUTES7 [MINUTES8 [MINUTES9
#                             [MINUTES10 [MINUTES11 [STEPS12 [STEPS13 [STEPS14 [STEPS15 [STEPS16 [STEPS17]]]]]]]]]]]]]]]
#                             (default 151, 85, 100, 95, 65, 25, 60, 27, 81, 368, 600, 243, 132, 738, 4105)
#
# MINUTES: phases 1-3 (the masked-diffusion SFT recipe); MINUTES4: phase 4, the BiCache-aware
# fine-tune (prefix isolated in shallow layers for repeated rows, prefix K/V consistency term);
# MINUTES5, MINUTES6, MINUTES7: phases 5-7, rule/arith-heavy cycles that keep the BiCache terms
# (docs/model.md, sixth to eighth runs); MINUTES8, MINUTES9: phases 8-9, attention supervision of
# docqa's retrieval circuit (docqa rows only) and then of docqa and rule in the full mix (ninth run);
# MINUTES10, MINUTES11: phases 10-11, more arith rows, then arithmetic drill rows and rule rows that
# name their rule (tenth run); STEPS12, STEPS13: phases 12-13, a share of the steps on batches of
# short rule rows only (twenty-first and twenty-second runs), budgeted in steps, not minutes;
# STEPS14, STEPS15, STEPS16: phases 14-16, number tokens with fixed Fourier dims (--fourier 12) and
# add/sub drills, the last on batches of drill rows only (twenty-fourth and twenty-fifth runs);
# STEPS17: phase 17, the same mix with 30% rule-only and 25% drill-only batches for 4105 steps
# (twenty-sixth run; run on a GPU: TRAIN_DEVICE=cuda gives train.py --device cuda, ~8 min on an
# H200, against ~7.5 hours of f32 steps on a 2-core AVX2 CPU);
# MINUTES5..STEPS17 = 0 skips that phase.
#
# Time: ~10 s for data + tokenizer + fixtures; training is time-budgeted by MINUTES
# of wall time, phases 12-17 by steps (the committed model: 4 min probe + 62 + 85 + 85 + 100 + 95 + 65 + 25 + 60 + 27 + 81 + 37 + 47 + 31 + 27 + 80 min, ~911 min at 0.08-1.5
# step/s on 2-core CPU boxes, ~7.3M params, bf16 autocast, f32 from phase 12 on an AVX2-only CPU,
# then phase 17's 7.6 min on one H200 GPU; see docs/model.md for the recipe and why);
# export ~5 s. Output: models/tiny-llada.gguf (bf16, ~15 MB).
# Tokenizer: tools/train/tokenizer.json is part of the model's definition and is checked
# (bpe.py --check: every name, value and number one token), not learnt again: bpe.py learnt it on
# the suite as the first run generated it, and the suite has grown since (worked answers, drills),
# so learning it now gives another vocabulary (other ids) that no committed checkpoint matches.
# NEW_TOKENIZER=1 learns a new one, for a run from scratch only.
# Interrupted runs: each finished phase leaves tools/train/ckpt/phase-N.done and a rerun skips it;
# an interrupted phase runs again from its start, on the checkpoint it had reached. Without
# tools/train/ckpt/latest.pt the markers are cleared and training starts from scratch.
set -euo pipefail
cd "$(dirname "$0")/../.."
die() { echo "make_model.sh: $*" >&2; exit 2; }
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
[ $# -le 15 ] || die "at most 15 arguments (MINUTES .. STEPS17), got $#"
for a in "$@"; do [[ $a =~ ^[0-9]+$ ]] || die "arguments are whole numbers of minutes or steps, got '$a' (--help)"; done
PY=${PYTHON:-/usr/bin/python3}
MIN=${1:-151}
MIN4=${2:-85}
MIN5=${3:-100}
MIN6=${4:-95}
MIN7=${5:-65}
MIN8=${6:-25}
MIN9=${7:-60}
MIN10=${8:-27}
MIN11=${9:-81}
STEPS12=${10:-368}
STEPS13=${11:-600}
STEPS14=${12:-243}
STEPS15=${13:-132}
STEPS16=${14:-738}
STEPS17=${15:-4105}
DEVICE=${TRAIN_DEVICE:-cpu}
[ "$MIN" -ge 5 ] || die "MINUTES (phases 1-3) must be >= 5: phase 1 alone takes 4, got $MIN"
[[ $DEVICE =~ ^(cpu|cuda|cuda:[0-9]+)$ ]] || die "TRAIN_DEVICE must be cpu, cuda or cuda:N, got '$DEVICE'"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_WAIT_POLICY=PASSIVE
# glibc returns big buffers to the OS after every step otherwise (page-fault storm)
export MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=17179869184 MALLOC_TOP_PAD_=1073741824
mkdir -p tests/data/suite tools/train/ckpt models
$PY tools/train/suite.py --heldout tests/data/suite/heldout.jsonl --test
if [ "${NEW_TOKENIZER:-0}" = 1 ] || [ ! -f tools/train/tokenizer.json ]; then
  $PY tools/train/bpe.py --out tools/train/tokenizer.json
else
  $PY tools/train/bpe.py --check tools/train/tokenizer.json
fi
$PY tools/train/make_fixtures.py
LOG=tools/train/ckpt/train.log
# phase N CMD...: runs CMD (its output also to $LOG) unless phase N finished before.
phase() {
  local n=$1
  shift
  if [ -f "tools/train/ckpt/phase-$n.done" ]; then
    echo "make_model.sh: phase $n finished before (tools/train/ckpt/phase-$n.done), skipped"
    return 0
  fi
  echo "make_model.sh: phase $n"
  "$@" 2>&1 | tee -a "$LOG"
  touch "tools/train/ckpt/phase-$n.done"
}
if [ ! -f tools/train/ckpt/latest.pt ]; then
  rm -f tools/train/ckpt/phase-*.done
  # Phase 1 (fresh): docqa only, one fact per document, padding targets down-weighted, no
  # mask-anywhere rows: the model learns to copy a value from the prefix (4 minutes).
  phase 1 $PY tools/train/train.py --fresh --minutes 4 --level 1 --max-facts 1 --p-doc 1.0 --p-full 0 \
    --eos-weight 0.05 --warmup 50 --eval-every 100
  LEVEL=(--level 2)
else
  LEVEL=()
fi
# Phase 2 (resumes): docqa-heavy mix, accuracy-gated growth of the document length (62 min).
# Phase 3 (resumes): a second learning-rate cycle (peak 6e-4, cosine over the whole 174 min) with a
# lower curriculum gate, so documents grow to the held-out suite's 10-32 facts (85 min).
# MINUTES scales both phases (default 151 = 4 + 62 + 85, the committed model's recipe).
P2=$(( (MIN - 4) * 62 / 147 )); P3=$(( MIN - 4 - P2 ))
phase 2 $PY tools/train/train.py --minutes "$P2" "${LEVEL[@]}" --p-doc 0.85 --raise-at 0.5 \
  --p-full 0.05 --eos-weight 0.05 --eval-every 15 --eval-n 20
phase 3 $PY tools/train/train.py --minutes "$P3" --total-minutes "$((MIN + 23))" --lr 6e-4 --p-doc 0.85 --raise-at 0.45 \
  --p-full 0.05 --eos-weight 0.05 --eval-every 15 --eval-n 20
# Phase 4 (resumes, new learning-rate cycle): BiCache-aware fine-tuning, docs/history/model-training-runs.md "Fifth run".
# 4 rows of each batch of 16 are repeated with their shared prefix isolated in layers < d, d ~ U{1,2},
# and a consistency term pulls the full request's prefix K/V in layers 0..d towards the isolated
# copy's. The committed model ran it from the step-7639 GGUF (tools/train/import_gguf.py): an
# 85-minute cosine cycle (MIN4 shorter stops it early).
phase 4 $PY tools/train/train.py --minutes "$MIN4" --new-cycle --cycle-minutes 85 --lr 4e-4 --iso-pairs 4 --iso-max 2 --cons-weight 5 \
  --p-doc 0.85 --raise-at 0.45 --p-full 0.05 --eos-weight 0.05 --eval-every 15 --eval-n 20
# Phase 5 (resumes, new cycle): a third of the rows on each family, docs/history/model-training-runs.md "Sixth run".
if [ "$MIN5" -gt 0 ]; then
  phase 5 $PY tools/train/train.py --minutes "$MIN5" --new-cycle --cycle-minutes 100 --lr 5e-4 --p-doc 0.35 --p-rule 0.55 \
    --iso-pairs 4 --iso-max 2 --cons-weight 5 --raise-at 0.45 --p-full 0.05 --eos-weight 0.05 \
    --eval-every 15 --eval-n 20
fi
# Phase 6 (resumes, new cycle): rule and arith rows carry more questions (6-8 and 4-6, all answers
# masked) and the consistency term is doubled, docs/history/model-training-runs.md "Seventh run".
if [ "$MIN6" -gt 0 ]; then
  phase 6 $PY tools/train/train.py --minutes "$MIN6" --new-cycle --cycle-minutes 95 --lr 4e-4 --p-doc 0.5 --p-rule 0.5 \
    --rule-q 6,8 --arith-q 4,6 --iso-pairs 4 --iso-max 2 --cons-weight 10 --raise-at 0.45 --p-full 0.05 \
    --eos-weight 0.05 --eval-every 20 --eval-n 20
fi
# Phase 7 (resumes, new cycle): docqa rows carry 8-14 questions, rule 8-12, arith 4-6, and 40% of
# the docqa rows are two-or-three-fact entity-binding rows, docs/history/model-training-runs.md "Eighth run".
if [ "$MIN7" -gt 0 ]; then
  phase 7 $PY tools/train/train.py --minutes "$MIN7" --new-cycle --cycle-minutes 65 --lr 4e-4 --p-doc 0.6 --p-bind 0.4 \
    --bind-start 3 --bind-templates 0 --doc-q 8,14 --p-rule 0.5 --rule-q 8,12 --arith-q 4,6 --iso-pairs 4 \
    --iso-max 2 --cons-weight 10 --raise-at 0.45 --p-full 0.05 --eos-weight 0.05 --eval-every 20 --eval-n 20
fi
# Phase 8 (resumes, new cycle, docqa rows only): attention supervision (train.py --att-sup): in layer 1
# one head takes every answer slot to its question's entity and every fact value to its fact's
# entity, a contrastive term makes that head's output name the entity, and in layer 3 the answer
# slot attends to the asked value. Binding appears within minutes (docs/history/model-training-runs.md "Ninth run").
if [ "$MIN8" -gt 0 ]; then
  phase 8 $PY tools/train/train.py --minutes "$MIN8" --new-cycle --lr 1e-3 --p-doc 1 --p-bind 0.5 --bind-start 3 \
    --doc-q 8,14 --att-sup 1 --att-layers 1,3 --p-full 0.05 --eos-weight 0.05 --eval-every 100
fi
# Phase 9 (resumes, new cycle): the eighth run's mix with that supervision kept on, plus rule
# supervision (--rule-sup: in layer 5 each rule answer letter attends to the query letter it
# comes from).
if [ "$MIN9" -gt 0 ]; then
  phase 9 $PY tools/train/train.py --minutes "$MIN9" --new-cycle --cycle-minutes 60 --lr 6e-4 --p-doc 0.6 --p-bind 0.3 \
    --doc-q 8,14 --p-rule 0.5 --rule-q 8,12 --arith-q 4,6 --iso-pairs 4 --iso-max 2 --cons-weight 10 \
    --att-sup 1 --att-layers 1,3 --rule-sup 1 --rule-layer 5 --raise-at 0.45 --p-full 0.05 \
    --eos-weight 0.05 --eval-every 15 --eval-n 20
fi
# Phase 10 (resumes, new cycle): the same supervision with more arith rows (35% docqa, rule 30% of
# the rest), docs/history/model-training-runs.md "Tenth run".
if [ "$MIN10" -gt 0 ]; then
  phase 10 $PY tools/train/train.py --minutes "$MIN10" --new-cycle --cycle-minutes 27 --lr 4e-4 --p-doc 0.35 --p-bind 0.3 \
    --doc-q 8,14 --p-rule 0.3 --rule-q 8,12 --arith-q 4,6 --iso-pairs 4 --iso-max 2 --cons-weight 10 \
    --att-sup 1 --att-layers 1,3 --rule-sup 1 --rule-layer 5 --raise-at 0.45 --p-full 0.05 \
    --eos-weight 0.05
fi
# Phase 11 (resumes, new cycle of 95 min, stopped at 81 when it had flattened): 40% of the arith rows
# are drills of 12-16 single steps (--p-drill), half the rule rows name their rule (--p-named).
MIX11=(--p-doc 0.35 --p-bind 0.3 --doc-q 8,14 --p-rule 0.3 --rule-q 8,12 --p-named 0.5 --arith-q 4,6
  --p-drill 0.4 --drill-q 12,16 --iso-pairs 4 --iso-max 2 --cons-weight 10 --att-sup 1 --att-layers 1,3
  --rule-sup 1 --rule-layer 5 --raise-at 0.45 --p-full 0.05 --eos-weight 0.05)
if [ "$MIN11" -gt 0 ]; then
  phase 11 $PY tools/train/train.py --minutes "$MIN11" --new-cycle --cycle-minutes 95 --lr 4e-4 "${MIX11[@]}"
fi
# Phase 12 (resumes, new cycle over 368 steps): the phase-11 mix with mostly masked answers
# (--t-min 0.7), and half of the steps draw a batch of rule rows with 1-3 questions each
# (--rule-batches), docs/history/model-training-runs.md "Twenty-first run". The committed model ran it from the step-25846
# GGUF (tools/train/import_gguf.py: fresh optimizer) in 37 min of f32 steps.
RULE_MIX=("${MIX11[@]}" --t-min 0.7 --rule-batch-q 1,3 --eval-n 0)
if [ "$STEPS12" -gt 0 ]; then
  phase 12 $PY tools/train/train.py --minutes 120 --steps "$STEPS12" --new-cycle --lr 4e-4 "${RULE_MIX[@]}" \
    --rule-batches 0.5
fi
# Phase 13 (resumes, new cycle over 600 steps, lower peak): 60% of the steps on rule-only batches,
# docs/history/model-training-runs.md "Twenty-second run" (47 min of f32 steps).
if [ "$STEPS13" -gt 0 ]; then
  phase 13 $PY tools/train/train.py --minutes 180 --steps "$STEPS13" --new-cycle --lr 3e-4 "${RULE_MIX[@]}" \
    --rule-batches 0.6
fi
# Phases 14-16 (resume): the last 24 dims of the number tokens " 0".." 99" in the embedding and
# the output head held at cos/sin(2 pi k n / 100) (--fourier 12, tools/train/fourier.py), with
# add/sub drills, docs/history/model-training-runs.md "Twenty-fourth run" and "Twenty-fifth run". Phases 14 and 15 were
# stopped part-way through their cosine cycles (600 and 250 steps), hence --cycle-steps.
NUM_MIX=("${RULE_MIX[@]}" --fourier 12 --drill-ops +-)
if [ "$STEPS14" -gt 0 ]; then
  phase 14 $PY tools/train/train.py --minutes 180 --steps "$STEPS14" --cycle-steps 600 --new-cycle --lr 4e-4 "${NUM_MIX[@]}" \
    --rule-batches 0.4 --p-rule 0.25 --p-drill 0.6 --drill-q 16,24
fi
if [ "$STEPS15" -gt 0 ]; then
  phase 15 $PY tools/train/train.py --minutes 180 --steps "$STEPS15" --cycle-steps 250 --new-cycle --lr 4e-4 "${NUM_MIX[@]}" \
    --rule-batches 0.15 --p-doc 0.2 --p-rule 0.15 --p-drill 0.9 --drill-q 24,32
fi
# Phase 16: 60% of the steps on batches of drill rows only (--drill-batches, 8-12 add/sub steps
# per row), 15% on rule-only batches, the rest the phase-13 mix with drills (80 min of f32 steps).
if [ "$STEPS16" -gt 0 ]; then
  phase 16 $PY tools/train/train.py --minutes 240 --steps "$STEPS16" --new-cycle --lr 4e-4 "${NUM_MIX[@]}" \
    --rule-batches 0.15 --drill-batches 0.6 --drill-batch-q 8,12
fi
# Phase 17: 30% of the steps on rule-only batches, 25% on add/sub drill batches, the rest the
# phase-13 mix with drills; 4105 steps in one cosine cycle (docs/model.md "Twenty-sixth run": the
# committed model ran them on an H200 in a 7.6-minute time-based cycle, with --eval-n 30).
if [ "$STEPS17" -gt 0 ]; then
  phase 17 $PY tools/train/train.py --minutes 600 --steps "$STEPS17" --new-cycle --lr 4e-4 "${NUM_MIX[@]}" \
    --rule-batches 0.3 --drill-batches 0.25 --drill-batch-q 8,12 --device "$DEVICE"
fi
$PY tools/train/export.py --out models/tiny-llada.gguf
