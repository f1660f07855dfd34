"""The one runner: every registered method × dataset × ε × seed, measured the same way.

Each run calls the method's ``prepare`` (its once-only private work), trains it as the method
says, and records one :class:`~tfdpmech.report.schema.RunResult`: accuracy (and per epoch),
claimed and provable ε from the run's ledger, δ, time, throughput, peak memory and the audits
asked for (tensorflow-privacy's membership-inference attacks; further audits register in
:data:`~tfdpmech.experiments.audits.AUDITS`). Presets (:mod:`tfdpmech.experiments.presets`) are named configurations.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from ..accounting.ledger import PrivacyLedger
from ..accounting.sigma_search import NotCertifiableError
from ..report.schema import SCHEMA_VERSION, RunResult
from ..validation import check_delta, check_epsilon, check_positive_int
from . import methods as _methods  # noqa: F401  (registers the built-in methods)
from .audits import AUDITS, register_audit
from .context import MODEL_FAMILIES, TABULAR_MODELS, TEXT_MODELS, Context, build_context, dataset_kind
from .measuring import EpochRecorder, PeakMemory, device_description
from .options import check_options
from .progress import Progress
from .registry import METHODS, Method, Prepared, method as get_method
from .users import largest_user_note
from .run_parts import RunParts
from .run_store import RunStore

__all__ = ["CompareConfig", "run_comparison", "run_one", "AUDITS", "register_audit"]

# every method that uses the public records has DP-SGD with the same public pre-training beside it
# (dpsgd_head, dpsgd_finetune) and the public model alone (public_only, added by the runner)
DEFAULT_METHODS = ("nonprivate", "dpsgd", "dpsgd_head", "dpsgd_finetune", "adlm_per_record", "ilm_per_record",
                   "adlm_shared", "outpert_reference", "outpert_paper_bound", "outpert_head", "fm_head",
                   "fm_head_gauss")


@dataclasses.dataclass
class CompareConfig:
    """What to run. The defaults (preset ``demo``) fit the embedded MNIST sample on a 2-core CPU.

    Attributes:
        datasets: dataset names (images: ``mnist_sample``, ``mnist``, ``fashion_mnist``, ``cifar10``;
            tabular: ``breast_cancer``, ``iris``, ``synthetic``; text: ``sentiment_snippets``).
        methods: registered method names (``tfdpmech methods`` lists them).
        epsilons, seeds: the grid; non-private methods run once per seed.
        epochs, batch_size, learning_rate: the shared training recipe (a method may state its own).
        model: model family: ``mlp`` or ``cnn`` for images, ``linear`` for tabular data, ``bert_tiny`` for text.
        delta: δ for the (ε, δ) methods on image data (tabular DP-ERM methods use 1/n²).
        public: public data: a count of training records kept out of the private set, a public
            source name (e.g. ``digits``; text data: ``other_domains``), or 0 for none.
        l2: the L2 coefficient of the tabular DP-ERM methods.
        audit: audits to run after each training: ``"mia"`` and any registered in :data:`AUDITS`.
        options: preset-specific settings (e.g. ``pretrain_epochs`` for pCDBN).
        left_out: methods of the preset's list this installation cannot run, ``{name: reason}`` (set by
            ``tfdpmech compare``; results.md lists them).
        out, verbose, preset: where the report goes, progress on/off, the preset's name.
        stored_only: with ``resume``, train nothing: report the stored runs of the plan and list the
            others as not run yet (a long preset's report while it is under way).
        subsets: methods run on part of the grid only, ``{method: {"epsilons": (...), "seeds": (...)}}``
            (a slow method at fewer points; results.md states it).
        published: the papers' own numbers the report sets beside the runs, ``{"label", "epsilon",
            "accuracy", "source"[, "delta"]}`` each (drawn as points, never as measured rows).
        resume: keep every finished run in ``out/runs.jsonl`` as it ends and do not run again the
            runs found there (:mod:`~tfdpmech.experiments.run_store`): a long preset survives a kill; a run
            trained through ``make_private`` also keeps its last finished epoch in ``out/parts/`` and continues
            from it (:mod:`~tfdpmech.experiments.run_parts`).
    """

    datasets: tuple = ("mnist_sample",)
    methods: tuple = DEFAULT_METHODS
    epsilons: tuple = (0.25, 0.5, 1.0, 2.0, 8.0)
    seeds: tuple = (0, 1)
    epochs: int = 15
    batch_size: int = 200
    model: str = "mlp"
    delta: float = 1e-5
    public: object = 1000
    learning_rate: float = 5e-3
    l2: float = 0.01
    audit: tuple = ("mia",)
    options: dict = dataclasses.field(default_factory=dict)
    left_out: dict = dataclasses.field(default_factory=dict)
    out: str = "results"
    verbose: int = 1
    preset: str = "demo"
    resume: bool = False
    published: tuple = ()
    subsets: dict = dataclasses.field(default_factory=dict)
    stored_only: bool = False

    def validate(self) -> "CompareConfig":
        """Check every setting before anything is trained; ValueError naming the setting and the fix."""
        if not self.methods:
            raise ValueError("no methods given; pass e.g. --methods nonprivate,dpsgd (`tfdpmech methods` lists them)")
        self.methods = tuple(dict.fromkeys(self.methods))  # a method named twice runs once
        for name in self.methods:
            get_method(name)
        if not self.datasets:
            raise ValueError("no dataset given; pass e.g. --dataset mnist_sample")
        kinds = {name: dataset_kind(name) for name in self.datasets}
        if not self.epsilons:
            raise ValueError("the ε list is empty; pass e.g. --epsilons 0.5,2,8")
        self.epsilons = tuple(check_epsilon(e, "epsilon") for e in self.epsilons)
        self.delta = check_delta(self.delta)
        self.epochs = check_positive_int(self.epochs, "epochs")
        self.batch_size = check_positive_int(self.batch_size, "batch_size")
        if not self.seeds:
            raise ValueError("the seed list is empty; pass e.g. --seeds 0,1")
        self.seeds = tuple(int(s) for s in self.seeds)
        if "image" in kinds.values() and self.model not in MODEL_FAMILIES:
            raise ValueError(f"model={self.model!r} for image data; choose from {sorted(MODEL_FAMILIES)}")
        if "tabular" in kinds.values() and self.model not in TABULAR_MODELS:
            raise ValueError(f"model={self.model!r} for tabular data; choose from {list(TABULAR_MODELS)}")
        if "text" in kinds.values() and self.model not in TEXT_MODELS:
            raise ValueError(f"model={self.model!r} for text data; choose from {list(TEXT_MODELS)}")
        if isinstance(self.public, bool) or not isinstance(self.public, (int, str)):
            raise TypeError(f"public={self.public!r}: pass a record count (e.g. 1000), a source name, or 0")
        if isinstance(self.public, int) and self.public < 0:
            raise ValueError(f"public={self.public} is negative; pass a record count >= 0")
        check_options(self.options)
        for key in ("max_private", "max_test"):  # caps of the private / test sets (0 or absent: all records)
            cap = (self.options or {}).get(key)
            if cap is not None and cap != 0:
                check_positive_int(cap, f"{key} (--{key.replace('_', '-')}, 0 for all records)")
        if self.stored_only and not self.resume:
            raise ValueError("stored_only reports the stored runs of a resumable comparison; pass --resume with it")
        for name, subset in self.subsets.items():
            if not isinstance(subset, dict) or set(subset) - {"epsilons", "seeds"}:
                raise ValueError(f"subsets[{name!r}]={subset!r}: give a dict with 'epsilons' and/or 'seeds'")
        for point in self.published:
            missing = {"label", "epsilon", "accuracy", "source"} - set(point)
            accuracy = None if missing else point["accuracy"]
            stated = (point.get("claim") if accuracy is None else 0.0 < float(accuracy) <= 1.0)
            if missing or not stated or not float(point["epsilon"]) > 0.0:
                raise ValueError(f"published point {point!r}: give label, epsilon > 0, accuracy in (0, 1] (or None "
                                 "with a 'claim' saying why the paper gives none) and source")
        unknown_audits = [a for a in self.audit if a not in AUDITS]
        if unknown_audits:
            raise ValueError(f"unknown audit(s) {unknown_audits}; choose from {sorted(AUDITS)} or none")
        for name in self.methods:
            m = METHODS[name]
            if not any(k in m.data for k in kinds.values()):
                raise ValueError(f"method {name!r} runs on {'/'.join(m.data)} data, not on {list(self.datasets)}; "
                                 "drop it or pick a matching --dataset")
            if m.uses_public and self.public in (0, "none"):
                raise ValueError(f"method {name!r} needs public data; pass --public N (e.g. 1000) or drop it")
            reason = None if self.stored_only else m.unavailable()  # a report of stored runs trains nothing
            if reason:
                raise ValueError(reason)
        if "public_only" in METHODS and "public_only" not in self.methods and any(
                METHODS[m].uses_public for m in self.methods):
            self.methods = (*self.methods, "public_only")  # what the public data alone give, always shown
        return self


def _ledger_fields(ledger, epochs: int) -> dict:
    if ledger is None:
        return dict(epsilon_claimed=None, epsilon_provable=None, delta=0.0, ledger=None,
                    provable_basis="no privacy")
    guarantee = ledger.provable(epochs)  # a Guarantee, or NoneProven with the reason (JSON: null + the reason)
    if guarantee:
        basis = "; ".join(dict.fromkeys(r.basis for r in ledger.releases)) + f". Total: {guarantee.basis}"
    else:
        basis = guarantee.reason
    return dict(epsilon_claimed=ledger.epsilon_claimed(epochs), epsilon_provable=guarantee.epsilon,
                delta=ledger.delta(epochs), ledger=ledger.to_dict(epochs), provable_basis=basis)


def _epsilon_words(result: RunResult) -> str:
    """Claimed and provable ε of a finished run with the neighbour relation, for the progress line."""
    from ..accounting.ledger import PrivacyLedger, describe_scope, format_epsilon

    if result.ledger is None:
        return ("ε = 0 for the private set (private data unused)"
                if (result.notes or {}).get("private_records_used") == 0 else "no privacy")
    per = " per query" if result.per == "query" else ""
    scope = describe_scope(*PrivacyLedger.from_dict(result.ledger).scope())
    return f"{format_epsilon(result.epsilon_claimed, result.epsilon_provable, result.delta)}{per} [{scope}]"


def _notes(prepared: Prepared, ctx: Context, method: Method, seed: int) -> dict:
    notes = dict(prepared.notes if prepared.notes_after_fit is None else prepared.notes_after_fit())
    public_seconds = ctx.public_training_seconds(seed) if method.uses_public else None
    if public_seconds is not None:  # the one-off public pre-training, outside the method's own time
        notes.setdefault("public_training_seconds", public_seconds)
    return notes


def run_one(ctx: Context, method: Method, epsilon, seed: int, *, audits=(), on_epoch=None,
            parts: RunParts | None = None) -> RunResult:
    """Prepare, train and measure one run of ``method`` at target ``epsilon`` with ``seed``; ``parts``: where a
    run that can resume mid-way saves each finished epoch and finds the epochs saved before (:mod:`.run_parts`)."""
    config = ctx.config
    keras.utils.set_random_seed(seed)
    with PeakMemory() as memory:
        start = time.perf_counter()
        prepared = method.prepare(ctx, epsilon, seed)
        preprocessing = (time.perf_counter() - start if prepared.preprocessing_seconds is None
                         else prepared.preprocessing_seconds)
        epochs = prepared.epochs or config.epochs
        resumes = parts is not None and prepared.resumable is not None
        before = parts.restore(prepared.resumable, epochs) if resumes else None
        recorder = EpochRecorder(ctx.x_test, ctx.labels_test, prepared.probabilities,
                                 None if on_epoch is None else lambda e, acc: on_epoch(e, epochs, acc),
                                 every=-(-epochs // 20), before=before)
        callbacks = [*prepared.callbacks, recorder]
        if resumes:
            callbacks.append(parts.saver(prepared.resumable, epochs, recorder, before, memory.so_far))
        trained = time.perf_counter()
        prepared.train_for(epochs - recorder.offset, callbacks)
        train_seconds = time.perf_counter() - trained + (before or {}).get("train_seconds", 0.0)
        if prepared.curve is not None:  # a run that evaluates itself and resumes at any step: its own record
            curve = prepared.curve()
            recorder.adopt(curve)
            train_seconds = curve.get("train_seconds", train_seconds)
        if prepared.seconds_in_fit is not None:  # a once-only release made by the first fit is preprocessing
            released = prepared.seconds_in_fit()
            train_seconds, preprocessing = train_seconds - released, preprocessing + released
    probabilities = prepared.probabilities(ctx.x_test)
    diverged = not bool(np.isfinite(probabilities).all())
    accuracy = float(np.mean(np.argmax(probabilities, axis=-1) == ctx.labels_test))
    steady = recorder.steady_seconds()
    per_epoch = prepared.examples_per_epoch or ctx.n_private
    result = RunResult(
        method=method.name, mode=method.mode, paper=method.paper, dataset=ctx.dataset,
        model=config.model, epsilon_target=epsilon, seed=seed, per=prepared.per, accuracy=accuracy,
        accuracy_curve=recorder.accuracy or [accuracy], curve_epochs=recorder.epochs or [epochs], diverged=diverged, train_seconds=train_seconds,
        seconds_per_epoch=recorder.seconds,
        examples_per_second=per_epoch / float(np.mean(steady)) if steady else None,
        preprocessing_seconds=preprocessing, peak_memory_kind=memory.kind,
        peak_memory_bytes=max(memory.peak_bytes, (before or {}).get("peak_memory_bytes", 0)),
        notes=_notes(prepared, ctx, method, seed), **_ledger_fields(prepared.ledger, epochs))
    if before is not None:
        result.notes["trained_in_parts"] = before["parts"] + 1
    if ctx.user_ids is not None and result.ledger is not None:  # what a record-level ε says of the largest user
        result.notes.update(largest_user_note(ctx.user_ids, *PrivacyLedger.from_dict(result.ledger).scope(),
                                              result.epsilon_provable, result.delta))
    for audit in audits:
        if not diverged:  # NaN outputs carry no membership signal to measure
            setattr(result, audit.field, audit.run(ctx, method, epsilon, seed, prepared))
    return result


def _plan(config: CompareConfig, ctx: Context) -> list:
    def grid(name):
        subset = config.subsets.get(name, {})
        epsilons = config.epsilons if METHODS[name].takes_epsilon else (None,)
        if "epsilons" in subset and METHODS[name].takes_epsilon:
            epsilons = tuple(e for e in epsilons if e in subset["epsilons"])
        return [(e, s) for e in epsilons for s in config.seeds if s in subset.get("seeds", config.seeds)]

    return [(METHODS[m], e, s) for m in config.methods if ctx.kind in METHODS[m].data for e, s in grid(m)]


def run_comparison(config: CompareConfig, *, log=print) -> dict:
    """Run every method × dataset × ε × seed; return results in the schema of :mod:`tfdpmech.report.schema`."""
    config.validate()
    contexts = [build_context(config, name) for name in config.datasets]
    plans = [(ctx, _plan(config, ctx)) for ctx in contexts]
    total = sum(len(p) for _, p in plans)
    started = time.perf_counter()
    device = device_description()
    log(f"tfdpmech compare ({config.preset}): {total} runs on {', '.join(config.datasets)}, model={config.model}, "
        f"{device}")
    progress = Progress(total, verbose=config.verbose)
    store = RunStore(config.out, config, enabled=config.resume)
    if len(store):
        log(f"resuming: {len(store)} finished runs in {store.path} are not run again")
    runs, skipped, pending, audit_report, i, stored_count = [], [], [], {}, 0, 0
    for ctx, plan in plans:
        audits = []
        for name in config.audit:
            status = AUDITS[name].status(config, ctx)
            audit_report.setdefault(name, {"status": status, "floor": {}})
            if name == "mia" and status == "run":
                from ..audit.mia_run import mia_implementation

                audit_report[name]["implementation"] = mia_implementation()
            if status == "run":
                audits.append(AUDITS[name])
                if AUDITS[name].floor is not None:
                    audit_report[name]["floor"][ctx.dataset] = AUDITS[name].floor(ctx)
            else:
                log(f"note: no {name} audit: {status}")
        for method, epsilon, seed in plan:
            i += 1
            run_words = f"{ctx.dataset} {method.name}" + (
                f" ε={epsilon:g}" if epsilon is not None else "") + f" seed={seed}"
            label = f"[{i}/{total}] {run_words}"
            done_before = i - 1

            def on_epoch(epoch, epochs, acc, label=label, done_before=done_before):
                progress.done = done_before + epoch / epochs
                progress.update(0, label, f"epoch {epoch}/{epochs} acc {acc:.3f}")

            key = store.key(ctx.dataset, method.name, epsilon, seed)
            with contextlib.ExitStack() as lock:
                stored = store.get(key)
                if stored is None and store.enabled and not config.stored_only:
                    # one process trains a run at a time; another may have stored it while this one trained others
                    lock.enter_context(RunParts(config.out, key).held(run_words))
                    store.reload()
                    stored = store.get(key)
                if stored is not None:  # finished before: its stored result, not run again
                    progress.done = i
                    stored_count += 1
                    if "run" in stored:
                        runs.append(stored["run"])
                        progress.finish_run(label, f"acc {stored['run']['accuracy']:.4f} (stored in {store.path})")
                    else:
                        skipped.append(stored["skipped"])
                        progress.finish_run(label, "skipped: ε not certifiable (stored)")
                    continue
                if config.stored_only:
                    progress.done = i
                    saved = RunParts(config.out, key).saved()  # a run in progress: the epochs it has saved
                    pending.append({"dataset": ctx.dataset, "method": method.name, "epsilon_target": epsilon,
                                    "seed": seed, **({} if saved is None else {"epochs_saved": saved["epochs_done"],
                                                                               "epochs": saved["epochs"]})})
                    continue
                parts = RunParts(config.out, key) if store.enabled else None
                if parts is not None and parts.path.exists():
                    log(f"{label}: continuing from the epochs saved in {parts.path}")
                try:
                    result = run_one(ctx, method, epsilon, seed, audits=audits, on_epoch=on_epoch, parts=parts)
                except NotCertifiableError as exc:  # raised by the calibration, before anything trained
                    progress.done = i
                    progress.finish_run(label, "skipped: ε not certifiable")
                    skipped.append({"dataset": ctx.dataset, "method": method.name, "epsilon_target": epsilon,
                                    "seed": seed, "reason": str(exc)})
                    store.add(key, skipped=skipped[-1])
                    continue
                progress.done = i
                diverged = " (diverged: NaN outputs)" if result.diverged else ""
                progress.finish_run(label, f"acc {result.accuracy:.4f}{diverged}, {_epsilon_words(result)}")
                runs.append(result.to_dict())
                store.add(key, run=runs[-1])
                if parts is not None:
                    parts.clear()
    progress.close()
    if config.stored_only and not runs and not skipped:
        raise ValueError(f"stored_only: {store.path} holds no finished run of this plan, so there is nothing to "
                         "report; run the comparison without --stored-only, or give the --out whose runs.jsonl "
                         "holds its runs")
    return {
        "schema": SCHEMA_VERSION,
        "preset": config.preset,
        "config": dataclasses.asdict(config),
        "environment": {"tensorflow": tf.__version__, "keras": keras.__version__, "device": device,
                        "python": sys.version.split()[0], "cpu_count": os.cpu_count()},
        "data": {ctx.dataset: {"kind": ctx.kind, "private": ctx.n_private, "public": len(ctx.x_public),
                               "public_source": ctx.public_source, "test": len(ctx.x_test), "note": ctx.note}
                 for ctx in contexts},
        "methods": {m: {"description": METHODS[m].description, "mode": METHODS[m].mode, "paper": METHODS[m].paper}
                    for m in config.methods},
        "runs": runs,
        "skipped": skipped,
        "pending": pending,
        "stored_runs": stored_count,
        "audit": audit_report,
        "total_seconds": time.perf_counter() - started,
    }
