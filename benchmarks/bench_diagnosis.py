"""The diagnosis on the corpus of real library kernels (tests/diagnosis/corpus.py): the share of
findings whose primary class is right, unrelated extra violations, false alarms.

    python benchmarks/bench_diagnosis.py [--only NAME ...] [--json out.json]

Each case's cause was established without kcontract (the corpus says how).  A finding is a
case with a cause (or a kernel error); its primary class is right when the diagnosis's primary
causes are exactly the established ones; an unrelated extra violation is a violated contract
that is neither a right primary cause nor explained by one; a false alarm is a conforming case
that does not come out conformant.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "diagnosis"))

from corpus import CASES, available, score  # noqa: E402

from kcontract.check.runner import check  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    scores, rows = [], []
    print(f"{'case':36s} {'want':20s} {'primary':24s} {'ok':3s} {'extra':5s} {'s':>5s}")
    for case in CASES:
        if args.only and not any(o in case.name for o in args.only):
            continue
        if not available(case):
            print(f"{case.name:36s} skipped ({case.needs} not installed)")
            continue
        t0 = time.perf_counter()
        run = check(case.spec, op=case.op, dtype=case.dtype, framework=case.framework,
                    declare=case.declare, hints=True)
        s = score(case, run)
        scores.append(s)
        want = "kernel error" if case.error else (",".join(s.causes) or "conforms")
        if case.evidence and sorted(s.causes) != sorted(case.causes):
            want += "*"  # the experiment found otherwise on this machine
        got = ",".join(s.primary) or "conforms"
        ok = ("yes" if s.right else "NO") if s.finding else ("yes" if not s.false_alarm else "NO")
        dt = time.perf_counter() - t0
        print(f"{case.name:36s} {want:20s} {got:24s} {ok:3s} {len(s.unrelated):5d} {dt:5.1f}")
        rows.append({"case": case.name, "want": want, "primary": list(s.primary), "ok": ok,
                     "unrelated": list(s.unrelated), "violated": list(s.violated),
                     "seconds": round(dt, 2)})
    findings = [s for s in scores if s.finding]
    right = sum(s.right for s in findings)
    extras = sum(len(s.unrelated) for s in findings)
    alarms = sum(s.false_alarm for s in scores)
    violations = sum(len(s.violated) for s in findings)
    share = 100.0 * right / len(findings) if findings else 0.0
    extra_share = 100.0 * extras / len(findings) if findings else 0.0
    print()
    print(f"cases: {len(scores)} ({len(findings)} findings, {len(scores) - len(findings)} "
          f"conforming)")
    print(f"primary class right: {right} of {len(findings)} findings ({share:.1f} %; target "
          f">= 98 %)")
    print(f"unrelated extra violations: {extras} ({extra_share:.1f} % of findings; target <= 2 %)"
          f"; violated contracts on findings: {violations}")
    print(f"false alarms: {alarms} of {len(scores) - len(findings)} conforming cases "
          f"(target 0)")
    if any(s.case.evidence and sorted(s.causes) != sorted(s.case.causes) for s in scores):
        print("* established on this machine by the case's experiment, unlike where the corpus "
              "was written")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"cases": rows, "primary_right": right, "findings": len(findings),
                       "unrelated_extras": extras, "false_alarms": alarms}, fh, indent=1)
    return 0 if (share >= 98 and extra_share <= 2 and alarms == 0) else 1


if __name__ == "__main__":
    sys.exit(main())
