"""The one result record of every run, whatever the method, dataset or preset.

``results.json`` is ``{"schema": SCHEMA_VERSION, "config", "environment", "data", "methods",
"runs": [RunResult...], "audit", "total_seconds"}``. A provable ε of ``None`` means *none proven*
(see :data:`tfdpmech.accounting.ledger.NONE_PROVEN`), never "not measured".
"""

from __future__ import annotations

import dataclasses

__all__ = ["SCHEMA_VERSION", "RunResult", "RUN_FIELDS", "RESULTS_KEYS", "check_results_schema"]

SCHEMA_VERSION = 1


@dataclasses.dataclass
class RunResult:
    """One (method, target ε, seed) run.

    Attributes:
        method, mode, paper: the registered method, its mode word (``"reference"``, ``"private"``
            or ``"none"``) and the paper it implements (or None).
        dataset, model: what it ran on.
        epsilon_target: the ε the method was asked for (None for non-private methods).
        epsilon_claimed: the ε the paper or method states (None for non-private methods).
        epsilon_provable: the ε a correct argument gives; None = none proven (or non-private).
        provable_basis: the argument behind ``epsilon_provable``, or why there is none.
        delta: δ of the guarantee (0 for pure ε).
        per: ``"training"`` (the ε covers the run and any number of queries) or ``"query"``.
        accuracy: test accuracy after training; accuracy_curve: test accuracy after the epochs
            listed in curve_epochs (every epoch, or about 20 evenly spaced points for long runs).
        diverged: the model's test outputs contain NaN/inf.
        train_seconds, seconds_per_epoch, examples_per_second, preprocessing_seconds: costs.
        peak_memory_bytes, peak_memory_kind: the run's peak memory and how it was measured.
        mia_advantage: the larger advantage of the threshold / logistic-regression attacks (membership
            inference; tensorflow-privacy's where it imports, else tfdpmech's scikit-learn ones; the
            implementation is in ``audit["mia"]["implementation"]``); None if not run.
        canary: the one-run canary audit record (None if not run).
        ledger: the run's privacy ledger as a dict (None for non-private methods).
        notes: further facts a method reports.
    """

    method: str
    mode: str
    paper: str | None
    dataset: str
    model: str
    epsilon_target: float | None
    seed: int
    epsilon_claimed: float | None
    epsilon_provable: float | None
    provable_basis: str
    delta: float
    per: str
    accuracy: float
    accuracy_curve: list
    curve_epochs: list
    diverged: bool
    train_seconds: float
    seconds_per_epoch: list
    examples_per_second: float | None
    preprocessing_seconds: float
    peak_memory_bytes: int
    peak_memory_kind: str
    mia_advantage: float | None = None
    canary: dict | None = None
    ledger: dict | None = None
    notes: dict = dataclasses.field(default_factory=dict)

    @property
    def private(self) -> bool:
        return self.mode != "none"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


RUN_FIELDS = tuple(f.name for f in dataclasses.fields(RunResult))
RESULTS_KEYS = ("schema", "preset", "config", "environment", "data", "methods", "runs", "skipped", "audit",
               "total_seconds")


def check_results_schema(results: dict) -> None:
    """Raise ValueError if ``results`` does not follow the schema (used by tests and the writer)."""
    missing = [k for k in RESULTS_KEYS if k not in results]
    if missing:
        raise ValueError(f"results lack the keys {missing}")
    if results["schema"] != SCHEMA_VERSION:
        raise ValueError(f"results schema {results['schema']!r} is not {SCHEMA_VERSION}")
    for i, run in enumerate(results["runs"]):
        keys = set(run)
        if keys != set(RUN_FIELDS):
            raise ValueError(f"run {i} has keys {sorted(keys ^ set(RUN_FIELDS))} outside/missing from the schema")
