"""Accuracy loss and membership-inference leakage of output perturbation vs DP-SGD.

``python -m tfdpmech.experiments.output_perturbation [--quick] [--out DIR] [--eps 0.01 1 100]``

For each dataset (the embedded MNIST sample, scikit-learn's breast cancer when scikit-learn is
installed) and each ε, following Lu et al. §5.3 (spec ``specs/seed_001_output_perturbation.md``
§5.1–5.3) at a reduced scale:

1. Split the records into target train/test (n each) and k shadow train/test pairs.
2. Train the non-private baseline and the shadow models with the convexified loss (Eq. 22) and
   ``L2(0.001)``; train the per-class Shokri attack on the shadow models' outputs.
3. Query the target on every target-train (member) and target-test (non-member) record once:
   Algorithm 1 (``single_neuron``, Gaussian and Laplace, claimed only) and the ``all_logits``
   variant (proven given the sensitivity bound), each at per-query ε; and a DP-SGD model trained
   at (ε, δ = 1/(10n)) with tensorflow-privacy (skipped when it is not installed).
4. Accuracy loss = 1 − acc_DP/acc_baseline on the target test set; privacy leakage = TPR − FPR of
   the Shokri attack; tensorflow-privacy's own attacks on the same outputs when available.

The ε of Algorithm 1 is per query (each record is one query); DP-SGD's ε covers training and any
number of queries. The evaluation queries are not charged to a budget (``evaluation_mode``).
The attack models are trained on non-private shadow models for every target (the adversary knows
the training recipe but not the privacy mechanism); that is the same attack for every row.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings

import keras
import numpy as np

from ..audit.membership_inference import (
    ShadowModelAttack,
    accuracy_loss,
    run_tf_privacy_attacks,
    shadow_attack_data,
    split_target_and_shadows,
    tf_privacy_attack_floor,
    tf_privacy_attacks_available,
    TF_PRIVACY_MIA_HINT,
)
from ..accounting.ledger import NONE_PROVEN
from ..accounting.query_budget import QueryBudgetAccountant, gdp_epsilon
from ..data import load
from ..mechanisms.output_perturbation import DPPredictor, compute_bounds
from ..models.convexified import convexified_mlp

__all__ = ["run", "main", "load_tabular", "CONFIGS"]

L2 = 0.001
CONFIGS = {
    # name: n, shadows, epochs, batch, attack epochs
    "full": {"mnist_sample": (1000, 3, 30, 100, 50), "breast_cancer": (100, 3, 100, 25, 50)},
    "quick": {"mnist_sample": (300, 2, 10, 100, 20), "breast_cancer": (100, 2, 30, 25, 20)},
}
ALG1_VARIANTS = (("single_neuron", "gaussian"), ("single_neuron", "laplace"),
                 ("all_logits", "gaussian"), ("all_logits", "laplace"))


def load_tabular(name: str):
    """Features scaled to [0, 1] and one-hot labels of an offline dataset.

    ``mnist_sample``: the bundled MNIST test set, pixels / 255 (public bound). ``breast_cancer``:
    scikit-learn's copy (569 rows, 30 features); each column is divided by its maximum over the
    whole dataset, as the paper's code does. Those bounds come from the data (a leak the paper
    accepts; recorded in the results).
    """
    if name == "mnist_sample":
        d = load("mnist_sample", seed=0)
        x = np.concatenate([d.x_train, d.x_test]).reshape(-1, 28 * 28)
        y = np.concatenate([d.y_train, d.y_test])
        return x.astype(np.float32), y.astype(np.float32), "pixels / 255 (public bound)"
    if name == "breast_cancer":
        from sklearn.datasets import load_breast_cancer

        data = load_breast_cancer()
        x = data.data / np.abs(data.data).max(axis=0)
        y = np.eye(2, dtype=np.float32)[data.target]
        return x.astype(np.float32), y, "column / max over the dataset (bounds from the data, as the paper's code)"
    raise ValueError(f"unknown dataset {name!r}; use 'mnist_sample' or 'breast_cancer'")


def _softmax(z):
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _acc(probs, y):
    return float(np.mean(np.argmax(probs, 1) == np.argmax(y, 1)))


def _fmt(v, digits=4):
    if v is None:
        return NONE_PROVEN
    if isinstance(v, float) and not math.isfinite(v):
        return "∞"
    return f"{v:.{digits}g}"


def _dpsgd_outputs(x_in, y_in, x_out, eps, delta, epochs, batch, seed):
    try:
        from ..dpsgd import DPSGD
        dp = DPSGD(epsilon=eps, delta=delta, batch_size=batch, epochs=epochs, n=len(x_in))
    except ImportError as exc:
        return None, str(exc)
    keras.utils.set_random_seed(seed)
    base = convexified_mlp(x_in.shape[1], y_in.shape[1], l2=L2, compile=False)
    model = dp.compile(base)
    model.fit(dp.dataset(x_in, y_in, seed=seed), epochs=epochs, verbose=0)
    rel = dp.release
    return {"probs_in": _softmax(base(x_in)), "probs_out": _softmax(base(x_out)), "claimed": rel.epsilon_claimed,
            "provable": rel.epsilon_provable, "delta": rel.delta, "noise_multiplier": dp.noise_multiplier}, None


def run_dataset(name: str, eps_grid, cfg, *, seed: int = 0, with_dpsgd: bool = True, log=print) -> dict:
    """Steps 1–4 of the module docstring on one dataset; returns a dict of rows and facts."""
    n, k, epochs, batch, attack_epochs = cfg
    x, y, scaling = load_tabular(name)
    num_classes = y.shape[1]
    split = split_target_and_shadows(len(x), n, k, seed=seed)

    def train(xs, ys):
        keras.utils.set_random_seed(seed)
        model = convexified_mlp(x.shape[1], num_classes, l2=L2, alpha=1.0)
        model.fit(xs, ys, epochs=epochs, batch_size=batch, verbose=0)
        return model

    t0 = time.time()
    # 1.–2. shadow models and the per-class attack (spec §5.1 steps 2–4)
    probs, labels, member = shadow_attack_data(train, lambda m, xs: _softmax(m(xs)), x, y, split)
    attack = ShadowModelAttack(num_classes, epochs=attack_epochs, seed=seed).fit(probs, labels, member)
    x_in, y_in, x_out, y_out = x[split.target_in], y[split.target_in], x[split.target_out], y[split.target_out]
    target = train(x_in, y_in)
    base_in, base_out = _softmax(target(x_in)), _softmax(target(x_out))
    acc_base = _acc(base_out, y_out)
    leak_base = attack.advantage(base_in, y_in, base_out, y_out)
    bounds = compute_bounds(target, n_train=n)
    delta = 1.0 / (10 * n)
    mia_available = tf_privacy_attacks_available()

    def tfp(p_in, p_out):
        if not mia_available:
            return None
        res = run_tf_privacy_attacks(p_in, p_out, y_in, y_out)
        return max(r["advantage"] for r in res.values())

    rows = [{"dataset": name, "method": "baseline (convexified, non-private)", "noise": "-", "epsilon": None,
             "claimed": None, "provable": None, "delta": 0.0, "acc": acc_base, "acc_loss": 0.0,
             "priv_leak": leak_base, "tfp_advantage": tfp(base_in, base_out),
             "train_acc": _acc(base_in, y_in)}]
    log(f"[{name}] n={n}, k={k}, C={num_classes}: baseline test acc {acc_base:.4f}, leak {leak_base:.4f}, "
        f"Δz_T={bounds.delta_z:.4g}, Δp={bounds.delta_p:.4g} ({time.time() - t0:.0f}s)")
    for eps in eps_grid:
        # 3. Algorithm 1 and the all_logits variant, one query per record (spec A17)
        for mechanism, noise in ALG1_VARIANTS:
            pred = DPPredictor(target, bounds, QueryBudgetAccountant(eps, max_queries=1), noise=noise,
                               mechanism=mechanism, seed=seed + 1)
            with pred.evaluation_mode():
                p_in, p_out = pred.predict_proba(x_in), pred.predict_proba(x_out)
            acc = _acc(p_out, y_out)
            if mechanism == "single_neuron":
                provable, d = None, 0.0
            elif noise == "laplace":
                provable, d = eps, 0.0
            else:
                provable, d = gdp_epsilon(eps, delta), delta
            rows.append({
                "dataset": name, "method": f"Alg. 1 {'paper' if mechanism == 'single_neuron' else 'all_logits'}",
                "noise": noise, "epsilon": eps, "claimed": eps, "provable": provable, "delta": d,
                "acc": acc, "acc_loss": accuracy_loss(acc, acc_base),
                "priv_leak": attack.advantage(p_in, y_in, p_out, y_out), "tfp_advantage": tfp(p_in, p_out),
                "per": "query" + (" (μ-GDP)" if noise == "gaussian" else ""),
                "guarantee": "claimed (A2)" if provable is None else "proven given Δz_T bound (A1)",
            })
        # 3'. DP-SGD at (ε, δ)
        if with_dpsgd:
            out, err = _dpsgd_outputs(x_in, y_in, x_out, eps, delta, epochs, batch, seed)
            if out is None:
                log(f"[{name}] DP-SGD skipped: {err}")
                with_dpsgd = False
            else:
                acc = _acc(out["probs_out"], y_out)
                rows.append({
                    "dataset": name, "method": "DP-SGD (tf-privacy)", "noise": "gaussian", "epsilon": eps,
                    "claimed": out["claimed"], "provable": out["provable"], "delta": out["delta"], "acc": acc,
                    "acc_loss": accuracy_loss(acc, acc_base),
                    "priv_leak": attack.advantage(out["probs_in"], y_in, out["probs_out"], y_out),
                    "tfp_advantage": tfp(out["probs_in"], out["probs_out"]), "per": "training",
                    "guarantee": "proven (Poisson-RDP)", "noise_multiplier": out["noise_multiplier"],
                })
        log(f"[{name}] target ε={eps:g} done ({time.time() - t0:.0f}s)")
    return {"dataset": name, "n": n, "shadows": k, "epochs": epochs, "batch_size": batch, "num_classes": num_classes,
            "scaling": scaling, "bounds": bounds.to_dict(), "delta_dpsgd": delta, "rows": rows,
            "tf_privacy_mia": "run" if mia_available else TF_PRIVACY_MIA_HINT,
            "tf_privacy_mia_floor": tf_privacy_attack_floor(n, n, num_classes) if mia_available else None,
            "seconds": time.time() - t0}


def markdown_table(results) -> str:
    """One Markdown table with claimed and provable ε side by side."""
    head = ("| dataset | method | noise | ε | per | claimed ε | provable ε (δ) | test acc | acc loss | "
            "priv leak (Shokri) | tf-privacy MIA adv. |\n|---|---|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for res in results:
        for r in res["rows"]:
            if r["epsilon"] is None:  # the non-private baseline
                eps = claimed = prov = "∞ (non-private)"
            else:
                eps, claimed, prov = _fmt(r["epsilon"]), _fmt(r["claimed"]), _fmt(r["provable"])
                if r["provable"] is not None and r.get("delta"):
                    prov += f" (δ={r['delta']:.0e})"
            lines.append(
                f"| {r['dataset']} | {r['method']} | {r['noise']} | {eps} | {r.get('per', '-')} | "
                f"{claimed} | {prov} | {r['acc']:.4f} | {r['acc_loss']:.4f} | {r['priv_leak']:.4f} | "
                f"{'n/a' if r['tfp_advantage'] is None else format(r['tfp_advantage'], '.4f')} |"
            )
    for res in results:
        floor = res.get("tf_privacy_mia_floor")
        if floor:
            lines.append(f"\n{res['dataset']}: tf-privacy's attacks reach {floor['mean']:.3f} on average (max "
                         f"{floor['max']:.3f}, {floor['repeats']} draws) on random outputs of the same sizes "
                         f"({res['n']} members, {res['n']} non-members), which carry no membership signal.")
    return "\n".join(lines)


def run(*, quick: bool = False, out: str | None = None, eps_grid=(0.01, 1.0, 100.0), datasets=None,
        seed: int = 0, with_dpsgd: bool = True, log=print) -> dict:
    """Run the evaluation; print and return the results, and write ``results.json`` / ``results.md``."""
    cfgs = CONFIGS["quick" if quick else "full"]
    names = list(datasets) if datasets else list(cfgs)
    results = []
    for name in names:
        if name == "breast_cancer":
            try:
                import sklearn  # noqa: F401
            except ImportError:
                log("[breast_cancer] skipped: scikit-learn is not installed (pip install scikit-learn)")
                continue
        results.append(run_dataset(name, eps_grid, cfgs[name], seed=seed, with_dpsgd=with_dpsgd, log=log))
    table = markdown_table(results)
    payload = {"mode": "quick" if quick else "full", "eps_grid": list(eps_grid), "seed": seed,
               "keras": keras.__version__, "results": results, "table_markdown": table}
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "results.json"), "w") as fh:
            json.dump(payload, fh, indent=2, default=float)
        with open(os.path.join(out, "results.md"), "w") as fh:
            fh.write(table + "\n")
    return payload


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller n, fewer shadows and epochs")
    parser.add_argument("--out", default=None, help="folder for results.json and results.md")
    parser.add_argument("--eps", type=float, nargs="+", default=[0.01, 1.0, 100.0], help="ε grid")
    parser.add_argument("--datasets", nargs="+", default=None, choices=["mnist_sample", "breast_cancer"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-dpsgd", action="store_true", help="skip the DP-SGD rows")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=UserWarning)
    payload = run(quick=args.quick, out=args.out, eps_grid=tuple(args.eps), datasets=args.datasets, seed=args.seed,
                  with_dpsgd=not args.no_dpsgd, log=lambda s: print(s, file=sys.stderr, flush=True))
    print(payload["table_markdown"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
