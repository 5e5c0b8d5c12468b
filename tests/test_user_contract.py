"""The README's worked example: a user-written contract file that names its kernel."""
import shutil
from pathlib import Path

EXAMPLE = Path(__file__).parents[1] / "examples" / "user_contract"


def test_user_contract_passes_the_declared_kernel(run_cli):
    code, out, err = run_cli("check", EXAMPLE / "acme_matmul.contract.yaml", "--no-store")
    assert code == 0, out + err
    assert "conformant" in out


def test_user_contract_catches_a_bf16_accumulator(run_cli, tmp_path):
    shutil.copy(EXAMPLE / "acme_kernels.py", tmp_path)
    text = (EXAMPLE / "acme_matmul.contract.yaml").read_text()
    bad = tmp_path / "bad.contract.yaml"
    bad.write_text(text.replace("acme_kernels.py:matmul_bf16 ", "acme_kernels.py:matmul_bf16_acc "))
    code, out, _ = run_cli("check", bad, "--no-store")
    assert code == 1
    assert "C-PRC-01.ACC-LOOSE" in out
    # the terminal may wrap the line anywhere (at a space or inside a long path)
    squeeze = lambda text: "".join(text.split())  # noqa: E731
    assert squeeze(f"reproduce: kcontract check {bad} --contract acme/matmul-bf16-fp32acc") \
        in squeeze(out)


def test_readme_shows_the_example_verbatim():
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    assert (EXAMPLE / "acme_matmul.contract.yaml").read_text().strip() in readme
