#!/usr/bin/env bash
# docs/results.md, "Neutral prefixes, before and after" and "The field's estimators":
# 5 tasks x 3 prefix sources (writer before the strict rules, today's defaults, corpus noise), the
# 1.5B answering, one shared cache (the original samples are shared by the three runs of
# a task). About 65 min cold on 2 cores; a rerun reads every sample from the cache.
# Run from the repository's root with ../shared beside it: bash docs/results/neutrality_runs.sh
set -u
M="c3,c3_cross,self_consistency,semantic_entropy,num_semantic_sets,eigv,degree,eccentricity,kle"
OLD="--writer qwen2.5-coder-0.5b --writer-prompt v1 --prefix-rules basic"
NEW="--writer qwen2.5-coder-1.5b --writer-prompt v2 --prefix-rules strict"
mkdir -p runs/neutrality
CORPUS=runs/neutrality/papers-002-003.txt   # scientific prose unrelated to the items
cat ../shared/papers/002_*.txt ../shared/papers/003_*.txt > "$CORPUS"
COR="--corpus $CORPUS"
GEO="--config configs/demo.yaml"
STATS="--config configs/demo.yaml --task mmlu:high_school_statistics"
ARC="--config configs/demo.yaml --task arc_challenge:../shared/data/arc_challenge/test.jsonl"
TQA="--config configs/demo.yaml --task truthfulqa_mc1"
GSM="--config configs/demo-gsm8k.yaml"
run() {  # name, extra args...
  name=$1; shift
  echo "=== $name $(date +%T)"
  credo run --quiet --methods "$M" --bootstrap 1000 --out "runs/neutrality/$name" "$@" \
    > "runs/neutrality/$name.log" 2>&1
  echo "rc=$?"
}
run geo-new $GEO $NEW;     run geo-old $GEO $OLD
run stats-new $STATS $NEW; run stats-old $STATS $OLD
run arc-new $ARC $NEW;     run arc-old $ARC $OLD
run tqa-new $TQA $NEW;     run tqa-old $TQA $OLD
run geo-corpus $GEO $COR;  run stats-corpus $STATS $COR
run arc-corpus $ARC $COR;  run tqa-corpus $TQA $COR
run gsm8k-new $GSM $NEW;   run gsm8k-old $GSM $OLD
python docs/results/neutrality_tables.py runs/neutrality
