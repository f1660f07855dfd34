"""Choose the ``text`` preset's DP-SGD epochs and step per trainable part on a validation split, never on the test set.

Runs ``tfdpmech compare --preset text`` on ``sentiment_snippets_validation`` (7,454 of the 8,454 private training
snippets train, the other 1,000 score; the test snippets are not read) for each part (``dpsgd_text_head``,
``dpsgd_text_lora``, ``dpsgd_text_all``) at each point of the grid below, ε = 3, seed 0, the rest of the recipe as
stated in advance (``tfdpmech.experiments.methods.text_finetune.TEXT_DPSGD_RECIPE``: expected batch 512, C = 1,
Adam), and writes ``docs/results/text/tuning/tuning.md`` and ``tuning.json``: each point's validation accuracy and
the chosen one per part (the best; ties to the earlier point). The choice serves ε = 1, 3 and 8.

The grid, stated before its first run: 18 epochs (three times the stated 6: the stated recipe's runs end where
they start, within a point of the public model at every ε, which says the steps are too few and too short, not
the noise too large) at the stated step and at 4 and 16 times it. Finished runs are kept in
``docs/results/text/tuning/runs.jsonl``, so the sweep resumes after a kill (``--stored-only`` tabulates).

``--head-ceiling`` also fits a non-private logistic regression (scikit-learn, C in 0.01, 0.1, 1, 10) on the public
model's features of the same 7,454 texts and scores it on the 1,000: what any training of the head alone can reach
on these features (it trains the public model where the sweep has not, and is kept in ``tuning.json``).

    python tools/text_tuning.py [--parts head,lora,all] [--stored-only] [--head-ceiling]
"""

from __future__ import annotations

import argparse
import json
import os

from tfdpmech.experiments import preset_config, run_comparison
from tfdpmech.experiments.methods.text_finetune import TEXT_LEARNING_RATES
from tuning_report import write_tuning

OUT = os.path.join("docs", "results", "text", "tuning")
EPSILON = 3.0
EPOCHS = 18
FACTORS = (1, 4, 16)  # × the stated step of each part
GRID = {part: tuple(round(TEXT_LEARNING_RATES[part] * f, 10) for f in FACTORS) for part in ("head", "lora", "all")}


def sweep(parts, out=OUT, stored_only=False) -> dict:
    """Run (or, with ``stored_only``, only tabulate) the grid of ``parts``."""
    rows, public_only = [], None
    for part in parts:
        for learning_rate in GRID[part]:
            config = preset_config("text", datasets=("sentiment_snippets_validation",),
                                   methods=(f"dpsgd_text_{part}",), epsilons=(EPSILON,), seeds=(0,), out=out,
                                   resume=True, stored_only=stored_only,
                                   options={"text_recipe": {"epochs": EPOCHS, "learning_rate": learning_rate}})
            for run in run_comparison(config)["runs"]:
                if run["method"] == "public_only":  # the same public model in every comparison of the sweep
                    public_only = run["accuracy"]
                if run["method"] == f"dpsgd_text_{part}":
                    rows.append({"part": part, "epochs": EPOCHS, "learning_rate": learning_rate,
                                 "validation_accuracy": run["accuracy"]})
    chosen = {}
    for row in rows:  # in grid order: ties go to the earlier point
        if row["part"] not in chosen or row["validation_accuracy"] > chosen[row["part"]]["validation_accuracy"]:
            chosen[row["part"]] = row
    return {"epsilon": EPSILON, "epochs": EPOCHS, "grid": GRID, "runs": rows, "public_only": public_only,
            "chosen": {part: {"epochs": row["epochs"], "learning_rate": row["learning_rate"]}
                       for part, row in chosen.items()}}


def head_ceiling() -> dict:
    """``{C: validation accuracy}`` of a non-private logistic regression on the public model's features."""
    import keras
    from sklearn.linear_model import LogisticRegression

    from tfdpmech.experiments.context import build_context

    ctx = build_context(preset_config("text", datasets=("sentiment_snippets_validation",), seeds=(0,)),
                        "sentiment_snippets_validation")
    model = ctx.public_model(0)
    features = keras.Model(model.inputs, model.get_layer("logits").input)
    train, held = (features.predict(x, batch_size=256, verbose=0) for x in (ctx.x_private, ctx.x_test))
    return {str(c): float(LogisticRegression(C=c, max_iter=2000).fit(train, ctx.labels_private)
                          .score(held, ctx.labels_test)) for c in (0.01, 0.1, 1.0, 10.0)}


def write(result: dict, out=OUT) -> None:
    lines = ["# Text preset: each part's epochs and step chosen on the validation split", "",
             "`python tools/text_tuning.py`: DP-SGD at ε = 3 (δ = 1e-5) from the public model, trained on 7,454 of "
             "the private training snippets and scored on the other 1,000 (`sentiment_snippets_validation`); the "
             "test snippets are not read. Seed 0; expected batch 512, C = 1, Adam, as stated in advance "
             "(`TEXT_DPSGD_RECIPE`); 18 epochs at the stated step and at 4 and 16 times it. The chosen point serves "
             "ε = 1, 3 and 8 (`text_finetune.TEXT_CHOSEN`). Grid points not listed have not run yet.",
             "", "| part | epochs | learning rate | validation accuracy | chosen |", "|---|---|---|---|---|"]
    for row in result["runs"]:
        pick = result["chosen"][row["part"]]
        mark = "yes" if (pick["epochs"], pick["learning_rate"]) == (row["epochs"], row["learning_rate"]) else ""
        lines.append(f"| `dpsgd_text_{row['part']}` | {row['epochs']} | {row['learning_rate']:g} | "
                     f"{100 * row['validation_accuracy']:.2f} % | {mark} |")
    if result.get("public_only") is not None:
        lines += ["", f"The public model alone (`public_only`, where every row starts) scores "
                      f"{100 * result['public_only']:.2f} % on the 1,000."]
    if result.get("head_ceiling"):
        best = max(result["head_ceiling"].values())
        lines += ["", f"A non-private logistic regression on the public model's features (the head alone, no noise) "
                      f"scores at best {100 * best:.2f} % on the 1,000 (C in 0.01, 0.1, 1, 10: "
                      + ", ".join(f"{100 * v:.2f} %" for v in result["head_ceiling"].values()) + ")."]
    write_tuning(out, result, lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default=",".join(GRID), help=f"comma-separated, of {', '.join(GRID)}")
    parser.add_argument("--stored-only", action="store_true", help="train nothing: tabulate the finished runs")
    parser.add_argument("--head-ceiling", action="store_true", help="also fit the non-private head on the features")
    args = parser.parse_args()
    result = sweep(args.parts.split(","), stored_only=args.stored_only)
    stored = os.path.join(OUT, "tuning.json")
    if args.head_ceiling:
        result["head_ceiling"] = head_ceiling()
    elif os.path.exists(stored):
        with open(stored) as fh:
            result["head_ceiling"] = json.load(fh).get("head_ceiling")
    write(result)
    print(json.dumps(result["chosen"], indent=2))


if __name__ == "__main__":
    main()
