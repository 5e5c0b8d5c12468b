#!/bin/sh
# Record each op on "both stacks", then arbitrate every pair.  Run from this folder:
#   sh dispute.sh            (writes recordings and reports under out/)
# The recordings are self-contained: copy them to any machine (no accelerator, no
# kernels needed) and run the `kcontract arbitrate` lines there.
set -e
mkdir -p out
for side in a b; do
  kcontract record stack_$side.py:matmul    --op matmul    --dtype float32 --contract C-PRC-01 --out out/$side-matmul.kcr
  kcontract record stack_$side.py:embedding --op embedding --dtype float32 --contract C-EXC-02 --out out/$side-embedding.kcr
  kcontract record stack_$side.py:sum       --op sum       --dtype float32 --contract C-PRC-01 --out out/$side-sum.kcr
done

for op in matmul embedding sum; do
  echo
  echo "== $op =="
  kcontract arbitrate out/a-$op.kcr out/b-$op.kcr --label "stack A" --label "stack B" \
    --json out/arbitration-$op.json --report out/arbitration-$op.html || true  # 1: a side is at fault
done

