"""``kcontract verify-matmul``: exit 0 verified, 1 failed with suspects, 2 bad input."""
import numpy as np


def _save(tmp_path, **arrays):
    for name, arr in arrays.items():
        np.save(tmp_path / f"{name}.npy", arr)
    return [tmp_path / f"{n}.npy" for n in arrays]


def test_verify_matmul_exit_codes(run_cli, tmp_path):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 48)).astype(np.float32)
    b = rng.standard_normal((48, 40)).astype(np.float32)
    c = a @ b
    pa, pb, pc = _save(tmp_path, A=a, B=b, C=c)
    code, out, _ = run_cli("verify-matmul", pa, pb, pc, "--seed", 1)
    assert code == 0 and "VERIFIED" in out
    bad = c.copy()
    bad[10, 20] += 1e-3 * np.abs(c).max()
    (pbad,) = _save(tmp_path, Cbad=bad)
    code, out, _ = run_cli("verify-matmul", pa, pb, pbad, "--seed", 1)
    assert code == 1 and "FAILED" in out and "10,20" in out
    (pshort,) = _save(tmp_path, Bshort=b[:5])
    code, _, err = run_cli("verify-matmul", pa, pshort, pc)
    assert code == 2 and "inner dimensions" in err
    code, _, err = run_cli("verify-matmul", pa, pb, tmp_path / "missing.npy")
    assert code == 2
