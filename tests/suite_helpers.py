"""What the suite's family tests share: one contract run in isolation from the rest,
and the soundness of a contract's three-state calibration."""
from __future__ import annotations

from kcontract.check.calibrate import calibrate_contract
from kcontract.check.runner import check
from kcontract.suite import get_contract


def run_one(cid: str, kernel: str, dtype: str = "float32", *, in_process: bool = True, **kw):
    """Check ``kernel`` against the one suite contract ``cid`` (in-process by default: the
    tests that need isolation say so) and return its result."""
    c = get_contract(cid)
    run = check(kernel, op=c.op, dtype=dtype, contracts=[c], in_process=in_process, **kw)
    assert len(run.results) == 1
    return run.results[0]


def assert_soundly_calibrated(cid: str, *, any_code_of_the_class: bool = False) -> None:
    """Baseline fails the basic test; bad passes it and violates the contract with the
    contract's own signature code (or, where a class has several, one of its class's);
    good passes both."""
    c = get_contract(cid)
    cal = calibrate_contract(c)
    cells = {cell.role: cell for cell in cal.cells}
    detail = "; ".join(f"{r}: basic={x.basic} ({x.basic_note}) verdict={x.verdict} {x.message}"
                       for r, x in cells.items())
    assert cal.sound, f"{cid} calibration unsound: {cal.error} {detail}"
    if any_code_of_the_class:
        assert cells["bad"].code.startswith(f"{c.cls}."), detail
    else:
        assert cells["bad"].code == f"{c.cls}.{c.signature.code}", detail
