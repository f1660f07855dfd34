"""pCDBN as the authors' public code runs it: the ``"reference"`` mode.

Phan, Wu, Dou, "Preserving Differential Privacy in Convolutional Deep Belief Networks", Machine
Learning 2017 (corrected version, arXiv:1706.08839). The paper perturbs the Chebyshev-expanded
energy of every CRBM layer and the Taylor-expanded output loss once (functional mechanism, §3,
Eqs. 12–18) and reports 93.08 % on MNIST at ε = 0.5 after 2,400 epochs (§4.2, Fig. 5b). The
authors' public code (``haiphanNJIT/PrivateDeepLearning`` at ``77fb357``, ``pCDBN/pcdbn.py``,
``mlp.py``, ``logisticRegression.py``) trains as follows; each step below is one function naming
the source line it mirrors (:mod:`.reference_steps`):

1. encoder: two stride-2 SAME convolutions 5×5 with 32 and 64 maps and sigmoid units
   (``mlp.py:21-30``, ``pcdbn.py:68-80``); these ``sigmoid(conv)`` maps are the features;
2. pre-training of each encoder layer: ``h̄ = clip(σ̂(a/max a), 0, 1)`` with the degree-7
   polynomial whose five numerator coefficients carry ``Lap(1/(ε·B))·Δ_batch``, noise drawn once,
   Δ recomputed from every batch (``mlp.py:37-76``, ``pcdbn.py:110-131``), reconstruction by
   nearest up-sampling and the transposed filter (``mlp.py:86-92``), cost
   ``mean|h̄(v′) − h̄(v)| + mean|v′ − v|``, Adam 0.01, 10 epochs (``mlp.py:103-113``,
   ``pcdbn.py:144-180``);
3. fine-tuning of FC-25 (batch norm with batch statistics, ReLU) and the output layer only, on
   ``clip(h, 0, 1) + η`` with η ∈ R^25 shared by the batch and redrawn every batch,
   ``η ~ Lap(10·(25 + 25²/4)/(ε·B))``, summed Taylor loss with clean labels, Adam 2e-4
   (``logisticRegression.py:60-145``, ``pcdbn.py:84-105, 133-142, 185-206``);
4. evaluation without noise, all test images in one batch (``pcdbn.py:201-204``).

Ledger: the paper's ε as *claimed*, **none proven**: the labels reach the trained layers without
noise at every step, and the output noise is one draw shared by the batch, redrawn every batch.
Use :class:`tfdpmech.mechanisms.PrivateCDBN` (``mode="functional"``) for a proven bound.
"""

from __future__ import annotations

import math
import time

import keras
import numpy as np
import tensorflow as tf

from ...accounting.ledger import PrivacyLedger, Release, ledger_or_new
from ...contract import Mechanism, PreparedFit, refuse_model, release
from .networks import pcdbn_authors_network
from ...noise import make_rng
from ...released_data import array_fingerprint
from ...validation import check_epsilon, check_one_hot, check_positive_int, check_positive_real, check_unit_interval
from ..adlm.reference import REFERENCE_REASON
from ..adlm.reference_steps import next_batch_indices, taylor_terms
from .reference_steps import batch_delta, draw_coefficient_noise, draw_feature_noise, output_noise_scale, pretrain_cost

__all__ = ["PCDBNReference", "PCDBN_CODE_PATH"]

PCDBN_CODE_PATH = "authors' code path (haiphanNJIT/PrivateDeepLearning@77fb357, pCDBN/pcdbn.py)"
class PCDBNReference(Mechanism):
    """pCDBN as the authors' code trains it on MNIST (the reference mode); ledger: claimed, none proven.

    Args:
        epsilon: the paper's ε; the code gives this ε to every CRBM layer and to the output layer.
        batch_size: B (the code: 3,600).
        maps: feature maps of the two encoder layers (the code: 32, 64).
        hidden_units: FC width (the code: 25).
        pretrain_epochs: per encoder layer (the code: 10).
        pretrain_lr, finetune_lr: Adam steps (the code: 0.01 and 2e-4).
        seed: seeds weights, once-drawn noise, batch order and the per-batch generator.
        ledger: a :class:`~tfdpmech.accounting.ledger.PrivacyLedger` to record into.
    """

    settings = ("mode", "epsilon", "batch_size", "pretrain_epochs")
    name = "pcdbn"
    paper = "Phan et al. 2016, Private Convolutional Deep Belief Network (pCDBN): the authors' code"
    mode = "reference"
    modes = ("reference",)

    def __init__(self, epsilon: float, *, batch_size: int = 3600, maps=(32, 64), filter_size: int = 5,
                 hidden_units: int = 25, pretrain_epochs: int = 10, pretrain_lr: float = 0.01,
                 finetune_lr: float = 2e-4, seed: int | None = None, ledger: PrivacyLedger | None = None):
        self.epsilon = check_epsilon(epsilon)
        self.batch_size = check_positive_int(batch_size, "batch_size")
        self.ledger = ledger_or_new(ledger)
        self.seed = seed
        self._rng = make_rng(seed)
        if isinstance(maps, (str, bytes)) or not hasattr(maps, "__iter__"):
            raise TypeError(f"maps must be a sequence of feature-map counts, e.g. (32, 64), got {maps!r}")
        self.maps = tuple(check_positive_int(m, "maps") for m in maps)
        if not self.maps:
            raise ValueError("maps must name at least one encoder layer, e.g. (32, 64)")
        self.filter_size = check_positive_int(filter_size, "filter_size")
        self.hidden_units = check_positive_int(hidden_units, "hidden_units")
        self.pretrain_epochs = check_positive_int(pretrain_epochs, "pretrain_epochs", minimum=0)
        self.pretrain_lr = check_positive_real(pretrain_lr, "pretrain_lr")
        self.finetune_lr = check_positive_real(finetune_lr, "finetune_lr")
        self.model: keras.Model | None = None
        self.history: dict = {"epoch": [], "step": [], "accuracy": [], "loss": []}
        self.pretrain_history: dict = {}
        self._pretrained = self._finetuned = False

    # -- network --------------------------------------------------------------------------------
    def build(self, input_shape=(28, 28, 1), num_classes: int = 10) -> keras.Model:
        """The network: encoder (sigmoid stride-2 convolutions) → FC → BN → ReLU → clip → output."""
        s = None if self.seed is None else int(self._rng.integers(2**31 - 8))
        self.model = pcdbn_authors_network(num_classes, maps=self.maps, filter_size=self.filter_size,
                                           hidden_units=self.hidden_units, seed=s, input_shape=input_shape)
        self.num_classes = num_classes
        return self.model

    def _encoders(self):
        return [self.model.get_layer(f"enc{i + 1}") for i in range(len(self.maps))]

    def features(self, x01, upto: int | None = None, batch: int = 1000) -> np.ndarray:
        """``sigmoid(conv)`` maps after ``upto`` encoder layers (all by default), no noise (``pcdbn.py:68-80``)."""
        encs = self._encoders()[:upto]
        out = []
        for i in range(0, len(x01), batch):
            h = tf.constant(x01[i:i + batch])
            for enc in encs:
                h = enc(h)
            out.append(h.numpy())
        return np.concatenate(out)

    # -- step 2: pre-training -------------------------------------------------------------------
    def _pretrain_layer(self, index: int, x01, verbose: int) -> list:
        enc = self._encoders()[index]
        kernel_shape = tuple(enc.kernel.shape)
        noise_pos = tf.constant(draw_coefficient_noise(self.epsilon, self.batch_size, self._rng), tf.float32)
        noise_rec = tf.constant(draw_coefficient_noise(self.epsilon, self.batch_size, self._rng), tf.float32)
        self._pretrain_noise.append((noise_pos.numpy(), noise_rec.numpy()))
        opt = keras.optimizers.Adam(self.pretrain_lr, epsilon=1e-8)
        below = self._encoders()[:index]

        @tf.function
        def step(x):
            v = x
            for e in below:  # the layer's input: the frozen layers below (pcdbn.py:76, 166)
                v = e(v)
            delta = tf.stop_gradient(batch_delta(v, kernel_shape))  # pcdbn.py:166, 172
            with tf.GradientTape() as tape:
                cost = pretrain_cost(v, enc.kernel, enc.bias, noise_pos, noise_rec, delta)
            grads = tape.gradient(cost, [enc.kernel, enc.bias])
            opt.apply_gradients(zip(grads, [enc.kernel, enc.bias]))
            return cost, delta

        bs = min(self.batch_size, len(x01))
        per_epoch = math.ceil(len(x01) / bs)  # pcdbn.py:158
        costs = []
        idx_iter = next_batch_indices(len(x01), bs, per_epoch * self.pretrain_epochs, self._rng)
        for epoch in range(self.pretrain_epochs):
            c = [step(tf.constant(x01[next(idx_iter)])) for _ in range(per_epoch)]
            costs.append(float(np.mean([float(a) for a, _ in c])))
            self._deltas.append(float(c[-1][1]))
            if verbose:
                print(f"[pretrain layer {index + 1}] epoch {epoch + 1}/{self.pretrain_epochs} cost {costs[-1]:.5g} "
                      f"delta {self._deltas[-1]:.4g}")
        return costs

    # -- step 3: fine-tuning --------------------------------------------------------------------
    def _finetune(self, feats, y, epochs, feats_test, y_test, eval_every, callback, verbose, callbacks=()):
        fc, bn, clip, out = (self.model.get_layer(n) for n in ("fc", "batch_stat_norm", "relu_clip", "out"))
        variables = [fc.kernel, fc.bias, out.kernel, out.bias]  # pcdbn.py:105: var_list=[flat1.params, output.params]
        opt = keras.optimizers.Adam(self.finetune_lr, epsilon=1e-8)
        bs = min(self.batch_size, len(feats))
        scale = output_noise_scale(self.epsilon, self.batch_size, self.hidden_units, self.num_classes)
        gen = (tf.random.Generator.from_seed(int(self._rng.integers(2**31))) if self.seed is not None
               else tf.random.Generator.from_non_deterministic_state())

        def head(f, eta):
            return out(clip(bn(fc(f))) + eta)  # logisticRegression.py:72-74: clip(h, 0, 1) + noise, then W, b

        @tf.function
        def step(f, yy):
            eta = draw_feature_noise(scale, self.hidden_units, gen)  # one η per batch (pcdbn.py:198)
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(taylor_terms(head(f, eta), yy))  # summed, clean labels (logisticRegression.py:144)
            grads = tape.gradient(loss, variables)
            opt.apply_gradients(zip(grads, variables))
            return loss

        per_epoch = math.ceil(len(feats) / bs)  # pcdbn.py:194
        idx_iter = next_batch_indices(len(feats), bs, per_epoch * epochs, self._rng)
        ft, yt = (None, None) if feats_test is None else (tf.constant(feats_test), y_test)
        start, steps, last = time.perf_counter(), 0, None

        def log(epoch):
            acc = float(np.mean(np.argmax(head(ft, 0.0).numpy(), 1) == np.argmax(yt, 1)))  # pcdbn.py:202-204
            for k, v in (("epoch", epoch), ("step", steps), ("accuracy", acc), ("loss", last)):
                self.history[k].append(v)
            if verbose:
                print(f"epoch {epoch:5d} step {steps:6d} test accuracy {acc:.4f} loss {last} "
                      f"({time.perf_counter() - start:.0f}s)")
            if callback is not None:
                callback(steps, acc, last)

        if ft is not None:
            log(0)
        for epoch in range(1, epochs + 1):
            for cb in callbacks:
                cb.on_epoch_begin(epoch - 1)
            for _ in range(per_epoch):
                idx = next(idx_iter)
                last = float(step(tf.constant(feats[idx]), tf.constant(y[idx])))
                steps += 1
            self._finetuned = True  # the head has been trained: predictions are meaningful from here on
            for cb in callbacks:
                cb.on_epoch_end(epoch - 1)
            if ft is not None and (epoch % eval_every == 0 or epoch == epochs):
                log(epoch)
        return scale

    def prepare(self, model=None, x=None, y=None) -> PreparedFit:
        """The contract: ``fit(epochs)`` runs the authors' layer-wise pre-training and fine-tuning.

        Raises:
            ValueError: a ``model`` (this path trains the authors' network), or missing data.
        """
        refuse_model(self, model)
        if x is None or y is None:
            raise ValueError("PCDBNReference.prepare needs the private images and labels: prepare(x=..., y=...)")

        prepared = PreparedFit(None, x, y=y)
        self.steps_per_epoch = math.ceil(len(x) / self.batch_size)

        def authors_loop(epochs, callbacks, **kwargs):
            history = self.fit(x, y, epochs=epochs, callbacks=callbacks, **kwargs)
            prepared.model = self.model
            return history

        prepared.custom_fit = authors_loop
        return prepared

    def describe(self) -> dict:
        """The code path, batch size, pre-training epochs and (after :meth:`prepare`) steps per epoch."""
        facts = {"code_path": PCDBN_CODE_PATH, "batch_size": self.batch_size, "pretrain_epochs": self.pretrain_epochs}
        if getattr(self, "steps_per_epoch", None) is not None:
            facts["steps_per_epoch"] = self.steps_per_epoch
        return facts

    def fit(self, x01, y, *, epochs: int, x_test=None, y_test=None, eval_every: int = 5, callback=None,
            callbacks=(), verbose: int = 0) -> dict:
        """Pre-train both encoder layers, then fine-tune FC and output for ``epochs`` epochs.

        Args:
            x01: private training images in [0, 1] (``input_data.py:95``), NHWC.
            y: one-hot labels.
            epochs: fine-tuning epochs (the code: 2,400).
            x_test, y_test: if given, accuracy every ``eval_every`` epochs, all in one batch.
            callbacks: Keras callbacks whose epoch hooks run around every fine-tuning epoch.

        Returns:
            the learning curve ``{"epoch", "step", "accuracy", "loss", "seconds", "diverged"}``.

        Raises:
            ValueError: bad data or a second call (the budget is spent).
        """
        if self._pretrained:
            raise ValueError("this reference run already spent its budget; create a new one to train again")
        x = check_unit_interval(x01, "x")
        if x.ndim != 4:
            raise ValueError(f"x must be images of shape (n, H, W, C), got shape {x.shape}")
        y = check_one_hot(y, "y")
        if len(x) != len(y):
            raise ValueError(f"x has {len(x)} records but y has {len(y)}")
        epochs = check_positive_int(epochs, "epochs")
        eval_every = check_positive_int(eval_every, "eval_every")
        if x_test is not None:
            x_test = check_unit_interval(x_test, "x_test")
            y_test = check_one_hot(y_test, "y_test")
        self.build(x.shape[1:], y.shape[1])
        self._pretrained = True
        self._pretrain_noise, self._deltas = [], []
        start = time.perf_counter()
        for i in range(len(self.maps)):
            self.pretrain_history[f"crbm_layer_{i + 1}"] = self._pretrain_layer(i, x, verbose)
        pre = time.perf_counter() - start
        feats = self.features(x).reshape(len(x), -1)
        feats_test = None if x_test is None else self.features(x_test).reshape(len(x_test), -1)
        del x
        scale = self._finetune(feats, y, epochs, feats_test, y_test, eval_every, callback, verbose, callbacks)
        self._finetuned = True
        self._record(len(y), scale)
        self.history["seconds"] = time.perf_counter() - start
        self.history["pretrain_seconds"] = pre
        self.history["diverged"] = not all(np.isfinite(v) for v in self.history["loss"] if v is not None)
        return self.history

    def _record(self, n: int, scale: float) -> None:
        comps = [f"crbm_layer_{i + 1}" for i in range(len(self.maps))] + ["output_layer"]
        release(self.ledger, Release(
            component="pcdbn_reference", mechanism="laplace", epsilon_claimed=self.epsilon, epsilon_provable=None,
            neighbours="replace_one", protects="record",
            basis=(f"none proven ({PCDBN_CODE_PATH}): {REFERENCE_REASON} (η redrawn every batch); the pre-training "
                   "noise sits on five shared polynomial coefficients scaled by a Δ computed from each batch; the "
                   f"paper reports one ε per experiment, the code gives every component ({', '.join(comps)}) that ε"),
            sensitivity=self.num_classes * (self.hidden_units + self.hidden_units ** 2 / 4.0), noise_scale=scale,
            reproduction=True,
            details={"code_path": PCDBN_CODE_PATH, "components": comps, "epsilon_per_component": self.epsilon,
                     "batch_size": self.batch_size, "n": n, "output_noise_scale": scale,
                     "pretrain_delta_last_batch": self._deltas[-1] if self._deltas else None,
                     "pretrain_noise_fingerprint": array_fingerprint(np.array(self._pretrain_noise))},
        ))

    def predict_logits(self, x01) -> np.ndarray:
        """Logits on clean inputs, all records in one batch (batch norm uses their statistics)."""
        if not self._finetuned:
            raise ValueError("the model is not trained; call fit() first")
        return np.asarray(self.model(tf.constant(check_unit_interval(x01, "x")), training=False))

    def predict_proba(self, x01) -> np.ndarray:
        return tf.nn.softmax(self.predict_logits(x01)).numpy()

    def evaluate(self, x01, y) -> float:
        y = check_one_hot(y, "y")
        return float(np.mean(np.argmax(self.predict_logits(x01), 1) == np.argmax(y, 1)))

    def report(self) -> dict:
        return {"mechanism": self.name, "mode": self.mode, "code_path": PCDBN_CODE_PATH,
                "epsilon_claimed": self.ledger.epsilon_claimed(), "epsilon_provable": self.ledger.epsilon_provable(),
                "ledger": self.ledger.to_dict()}

