"""Choose the GroupNormalization groups of the ``finetune`` preset's backbone on public images only.

``tfdpmech.models.mobilenet_v2_gn`` replaces MobileNetV2's BatchNormalization by GroupNormalization. Each grid
point (the groups of every replacement: None, ``replace_batch_norm``'s default of the largest divisor of each
layer's channels up to 32; or a fixed count) trains the preset's public model as the preset trains it (Adam 1e-3,
batch 32, 20 epochs, cross-entropy; seed 10,000) on the first 1,600 of the preset's 2,000 public Fashion-MNIST
training images and scores it on the other 400. No private image and no test image is read. Writes
``docs/results/finetune/backbone/tuning.md`` and ``tuning.json`` (each point's validation accuracy and the chosen
one, the best; ties to the earlier point).

    python tools/finetune_backbone_groups.py
"""

from __future__ import annotations

import json
import os
import time

import keras
import numpy as np

from tfdpmech import data
from tfdpmech.experiments.context import PUBLIC_EPOCHS
from tfdpmech.models.application import mobilenet_v2_gn
from tuning_report import write_tuning

OUT = os.path.join("docs", "results", "finetune", "backbone")
GRID = (None, 8, 1)  # 32 groups where the channels allow (the default), 8, one group (the whole feature map)
PUBLIC, TRAIN = 2000, 1600  # the preset's public images; the first TRAIN train, the rest validate
EPOCHS, BATCH = PUBLIC_EPOCHS, 32  # the public model's recipe (tfdpmech.experiments.context.Context.public_model)


def score(groups, x_train, y_train, x_val, y_val) -> dict:
    """One grid point: the public model trained with ``groups``, its validation accuracy and seconds."""
    keras.utils.set_random_seed(10_000)
    model = mobilenet_v2_gn(10, x_train.shape[1:], groups=groups)
    model.compile(keras.optimizers.Adam(1e-3), loss=keras.losses.CategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    started = time.perf_counter()
    model.fit(x_train, y_train, epochs=EPOCHS, batch_size=BATCH, verbose=0)
    seconds = time.perf_counter() - started
    _, accuracy = model.evaluate(x_val, y_val, verbose=0, batch_size=400)
    _, train_accuracy = model.evaluate(x_train, y_train, verbose=0, batch_size=400)
    return {"groups": groups, "validation_accuracy": float(accuracy), "train_accuracy": float(train_accuracy),
            "seconds": seconds}


def sweep() -> dict:
    splits = data.load("fashion_mnist")
    x, y = np.asarray(splits.x_train[:PUBLIC]), np.asarray(splits.y_train[:PUBLIC])
    rows = []
    for groups in GRID:
        rows.append(score(groups, x[:TRAIN], y[:TRAIN], x[TRAIN:], y[TRAIN:]))
        print(json.dumps(rows[-1]), flush=True)
    best = max(rows, key=lambda row: row["validation_accuracy"])  # max keeps the first of equals
    return {"grid": list(GRID), "runs": rows, "chosen": best["groups"]}


def write(result: dict, out=OUT) -> None:
    lines = ["# Finetune preset: the backbone's GroupNormalization groups, chosen on public images", "",
             "`python tools/finetune_backbone_groups.py`: `tfdpmech.models.mobilenet_v2_gn` (MobileNetV2, width "
             f"0.35) trained as the preset's public model (Adam 1e-3, batch {BATCH}, {EPOCHS} epochs, seed 10,000) "
             f"on the first {TRAIN:,} of the preset's {PUBLIC:,} public Fashion-MNIST training images, scored on the "
             f"other {PUBLIC - TRAIN}; no private or test image is read. 'default' is `replace_batch_norm`'s: the "
             "largest divisor of each layer's channels up to 32.", "",
             "| groups | validation accuracy | training accuracy | train s | chosen |", "|---|---|---|---|---|"]
    for row in result["runs"]:
        name = "default" if row["groups"] is None else str(row["groups"])
        mark = "yes" if row["groups"] == result["chosen"] else ""
        lines.append(f"| {name} | {100 * row['validation_accuracy']:.2f} % | {100 * row['train_accuracy']:.2f} % | "
                     f"{row['seconds']:.0f} | {mark} |")
    write_tuning(out, result, lines)


if __name__ == "__main__":
    result = sweep()
    write(result)
    print(json.dumps(result["chosen"]))
