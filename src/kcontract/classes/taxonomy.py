"""The twelve contract classes, four families, three failure primitives."""
from __future__ import annotations

from dataclasses import dataclass

PRIMITIVES = {
    "path dependence": "floating-point non-associativity meets a schedule",
    "domain violation": "subnormals, NaN/Inf, overflow, out-of-range indices",
    "resource contention": "atomics, races, partitioning that depends on load",
}

FAMILIES = {
    "C-PRC": "precision",
    "C-ORD": "ordering and determinism",
    "C-CMP": "compiler-induced",
    "C-EXC": "exceptional values",
}


@dataclass(frozen=True)
class ContractClass:
    id: str
    name: str
    primitive: str
    promise: str
    signature: str

    @property
    def family_id(self) -> str:
        return self.id[:5]

    @property
    def family(self) -> str:
        return FAMILIES[self.family_id]


CLASSES: dict[str, ContractClass] = {c.id: c for c in [
    ContractClass("C-PRC-01", "Precision preservation under declared accumulator", "path dependence",
                  "the result is as accurate as accumulating in the declared format would make it",
                  "error that grows with the reduction length like a narrower accumulator; the recipe "
                  "the kernel really ran (accumulator bits)"),
    ContractClass("C-PRC-02", "Cancellation and overflow avoidance", "domain violation",
                  "a numerically stable formulation over the whole declared input domain: no "
                  "catastrophic cancellation, no intermediate overflow",
                  "failures concentrated on inputs with large offsets or magnitudes while small "
                  "inputs pass"),
    ContractClass("C-PRC-03", "Subnormal preservation", "domain violation",
                  "subnormal inputs, intermediates and outputs are honoured unless flushing is declared",
                  "zeros where the oracle gives a nonzero subnormal; results as if subnormal inputs "
                  "were zero"),
    ContractClass("C-PRC-04", "No undeclared format substitution", "path dependence",
                  "operands and intermediates are not rounded to a narrower format than declared, and "
                  "conversions round as declared (round-to-nearest-even unless stated)",
                  "outputs that match an emulation with operands in a narrower format, or a different "
                  "rounding mode"),
    ContractClass("C-ORD-01", "Reduction-order tolerance bound", "path dependence",
                  "the result lies within the error bound that holds for every summation order at the "
                  "declared precision", "spread across schedules, or distance from the oracle, above "
                  "the order-independent bound"),
    ContractClass("C-ORD-02", "Run-to-run determinism", "resource contention",
                  "(when declared) identical inputs, configuration and device give bitwise identical "
                  "outputs", "elements that differ between repeated runs; their pattern"),
    ContractClass("C-ORD-03", "Batch and partition invariance", "resource contention",
                  "(when declared) a row's bits do not depend on the batch size, on the other rows, or "
                  "on the number of threads or splits",
                  "rows whose bits change between being computed alone and inside batches"),
    ContractClass("C-CMP-01", "Fusion equivalence", "path dependence",
                  "a fused kernel matches the unfused composition within the composed tolerance, "
                  "creates no new NaN/Inf, substitutes no approximation unless declared",
                  "divergence from the unfused composition beyond the composed tolerance"),
    ContractClass("C-CMP-02", "Schedule and autotune invariance", "path dependence",
                  "every configuration the kernel may select meets the contract; results across "
                  "configurations stay within the reordering bound of each other",
                  "the configuration(s) that break it"),
    ContractClass("C-CMP-03", "Shape-polymorphism preservation", "domain violation",
                  "correct across the whole declared shape class, not only at the benchmarked shapes",
                  "pass rate on held-out shapes below the benchmarked shapes; the shape predicate that "
                  "separates failures"),
    ContractClass("C-EXC-01", "NaN/Inf propagation semantics", "domain violation",
                  "the declared policy holds: NaN and Inf appear in the output exactly where the oracle "
                  "puts them; overflow behaves as declared",
                  "exceptional input but finite output; exceptional values at unexpected positions; "
                  "missing at expected positions"),
    ContractClass("C-EXC-02", "Out-of-bounds access semantics", "domain violation",
                  "out-of-range indices, negative and past the end, get the declared policy",
                  "the behaviour observed on each side, against the declared one"),
]}
