#!/bin/sh
# Record torch's eager GELU and its torch.compile'd version at bfloat16 under the
# subnormal-preservation contract, then arbitrate.  Run from this folder (the first
# compile takes a while):  sh dispute.sh
set -e
mkdir -p out
kcontract record kernels.py:eager_gelu    --op gelu --dtype bfloat16 --framework torch --contract C-PRC-03 --out out/eager.kcr
kcontract record kernels.py:compiled_gelu --op gelu --dtype bfloat16 --framework torch --contract C-PRC-03 --out out/compiled.kcr --timeout 600
kcontract arbitrate out/eager.kcr out/compiled.kcr --label eager --label compiled \
  --json out/arbitration.json --report out/arbitration.html || true   # 1: a side is at fault
