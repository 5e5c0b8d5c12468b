"""A full ``kcontract calibrate``: wall time (target under 30 s on a 2-core CPU)
and the time per contract class."""
from __future__ import annotations

import sys
import time
from collections import defaultdict


def main() -> int:
    from kcontract.check.calibrate import calibrate
    t0 = time.perf_counter()
    cals = calibrate()
    wall = time.perf_counter() - t0
    per_class = defaultdict(lambda: [0, 0.0, 0])
    for c in cals:
        row = per_class[c.contract.cls]
        row[0] += 1
        row[1] += c.seconds
        row[2] += c.sound
    print(f"kcontract calibrate: {len(cals)} contracts x 3 kernels, "
          f"{sum(c.sound for c in cals)} soundly calibrated")
    print(f"  wall time {wall:6.2f} s   target < 30 s: {'met' if wall < 30 else 'NOT met'}")
    print(f"  {'class':10s} {'contracts':>9s} {'sound':>6s} {'seconds':>8s}")
    for cls in sorted(per_class):
        n, secs, sound = per_class[cls]
        print(f"  {cls:10s} {n:9d} {sound:6d} {secs:8.2f}")
    return 0 if all(c.sound for c in cals) else 1


if __name__ == "__main__":
    sys.exit(main())
