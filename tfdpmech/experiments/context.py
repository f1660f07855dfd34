"""The data and settings every run of a comparison shares: one split, one public set, one test set."""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

import keras
import numpy as np

from .. import data as image_data
from .. import data_tabular, data_text, models
from ..released_data import array_fingerprint
from .public_cache import load_public_weights, public_weights_path, save_public_weights
from .text_data import text_context
from .users import user_ids_for

__all__ = ["Context", "build_context", "MODEL_FAMILIES", "PUBLIC_SOURCES", "dataset_kind", "KNOWN_DATASETS",
           "TEXT_MODELS"]

# model family -> {role: builder(num_classes, input_shape)}; "private" is the noise-once mechanisms'
# network (bounded last hidden layer), "standard" the same widths with standard layers (DP-SGD).
MODEL_FAMILIES = {
    "mlp": {"private": models.mlp, "standard": models.standard_mlp},
    "cnn": {"private": models.mnist_cnn, "standard": models.standard_cnn},
    # DP-SGD's MNIST baseline (Papernot et al. 2021; Tramèr & Boneh 2021); the public section's heads keep AdLM's CNN
    "tanh_cnn": {"private": models.mnist_cnn, "standard": models.tanh_cnn},
    # a keras.applications backbone (MobileNetV2, width 0.35, GroupNorm): the fine-tuning preset's public model
    "mobilenet_v2": {"private": models.mobilenet_v2_gn, "standard": models.mobilenet_v2_gn},
}
TABULAR_MODELS = ("linear", "mlp")
# text: a small BERT classifier over token ids (models.text_classifier; the text extra)
TEXT_MODELS = {"bert_tiny": "tfdpmech.models.text_classifier.bert_text_classifier"}
KNOWN_DATASETS = (tuple(image_data.KNOWN_DATASETS) + tuple(data_tabular.TABULAR_DATASETS)
                  + tuple(data_text.TEXT_DATASETS))

# the public model's recipe (see Context.public_model); text: stated in advance (tfdpmech.experiments.text_data)
PUBLIC_RECIPES = {"image": {"epochs": 20, "learning_rate": 1e-3, "batch_size": 32},
                  "text": {"epochs": 3, "learning_rate": 1e-3, "batch_size": 32}}

# (kind, family, builder arguments, seed, recipe, public records' fingerprints) -> (weights, training seconds)
_TRAINED_PUBLIC: dict = {}


def _digits(num_classes, input_shape):
    """scikit-learn's 8×8 digits framed like MNIST (public data from another source)."""
    if num_classes != 10 or tuple(input_shape) != (28, 28, 1):
        raise ValueError(f"--public digits needs 28×28×1 images of 10 classes, got {tuple(input_shape)} and "
                         f"{num_classes} classes; pass a record count instead (e.g. --public 1000)")
    from ..features.public_data import load_digits_public  # scikit-learn's loader, only when asked for

    return load_digits_public((28, 28))


# name -> loader(num_classes, input_shape) -> (x_public, y_public one-hot): public data from another source
PUBLIC_SOURCES: dict[str, Callable] = {"digits": _digits}


def dataset_kind(name: str) -> str:
    """``"image"``, ``"tabular"`` or ``"text"``; ValueError naming the choices for an unknown dataset."""
    if name in image_data.KNOWN_DATASETS:
        return "image"
    if name in data_tabular.TABULAR_DATASETS:
        return "tabular"
    if name in data_text.TEXT_DATASETS:
        return "text"
    raise ValueError(f"unknown dataset {name!r}; choose from {list(KNOWN_DATASETS)}")


@dataclasses.dataclass
class Context:
    """What every method gets: the private, public and test records and shared helpers.

    Labels are one-hot (``y_*``) and integer (``labels_*``). ``x_public`` is empty when the
    comparison uses no public data.
    """

    config: object
    dataset: str
    kind: str
    x_private: np.ndarray
    y_private: np.ndarray
    x_public: np.ndarray
    y_public: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    public_source: str = "none"
    note: str = ""
    user_ids: np.ndarray | None = None  # the user of each private record (options["users"]; .users)
    model_kwargs: dict = dataclasses.field(default_factory=dict)  # what the family's builder needs (a vocabulary size)
    _public_models: dict = dataclasses.field(default_factory=dict, repr=False)
    _public_seconds: dict = dataclasses.field(default_factory=dict, repr=False)
    _public_spent: dict = dataclasses.field(default_factory=dict, repr=False)

    @property
    def labels_private(self) -> np.ndarray:
        return np.argmax(self.y_private, axis=-1)

    @property
    def labels_test(self) -> np.ndarray:
        return np.argmax(self.y_test, axis=-1)

    @property
    def n_private(self) -> int:
        return len(self.x_private)

    def build(self, role: str = "standard", **kwargs) -> keras.Model:
        """A fresh model of the comparison's family: ``role`` is ``"private"`` or ``"standard"``."""
        if self.kind == "text":
            from ..models.text_classifier import bert_text_classifier

            return bert_text_classifier(self.num_classes, self.x_private.shape[1:], **self.model_kwargs, **kwargs)
        builder = MODEL_FAMILIES[self.config.model][role]
        return builder(self.num_classes, input_shape=self.x_private.shape[1:], **self.model_kwargs, **kwargs)

    def optimizer(self, learning_rate: float | None = None):
        return keras.optimizers.Adam(self.config.learning_rate if learning_rate is None else learning_rate)

    def require_public(self, method: str) -> None:
        if len(self.x_public) == 0:
            raise ValueError(f"method {method!r} needs public data; pass --public N (records of the training split "
                             f"kept out of the private set) or --public <source> ({sorted(PUBLIC_SOURCES) or 'none'})")

    def public_model(self, seed: int) -> keras.Model:
        """The private-family model trained on the public records only (never the private ones), cached per seed.

        It serves AdLM's relevance (Phan et al. Algorithm 1 Step 1 on public data) and the
        public feature extractor of the functional head and of DP-SGD's pre-trained variants.
        Recipe (fixed, chosen on a validation fifth of the public records only, among
        {Taylor loss, cross-entropy} × {20, 60} epochs for the MLP and the CNN): softmax
        cross-entropy, Adam 1e-3, batch 32, 20 epochs; text: :data:`PUBLIC_RECIPES` ``["text"]``.
        A resumable comparison keeps its weights beside its runs (:mod:`.public_cache`).
        """
        self.require_public("public_model")
        if seed not in self._public_models:
            recipe = PUBLIC_RECIPES["text" if self.kind == "text" else "image"]
            # the same public records, family and recipe give the same model: trained once per process (a
            # sweep's comparisons share it), each context gets its own copy
            key = (self.kind, self.config.model, repr(sorted(self.model_kwargs.items())), seed,
                   repr(sorted(recipe.items())), array_fingerprint(self.x_public), array_fingerprint(self.y_public))
            started = time.perf_counter()
            keras.utils.set_random_seed(10_000 + seed)
            model = self.build("private")
            model.compile(keras.optimizers.Adam(recipe["learning_rate"]),
                          loss=keras.losses.CategoricalCrossentropy(from_logits=True))
            # a resumable comparison keeps it beside its runs: every process continuing it starts from the same one
            kept = public_weights_path(self.config.out, key, model) if self.config.resume else None
            if key in _TRAINED_PUBLIC:
                weights, self._public_seconds[seed] = _TRAINED_PUBLIC[key]
                model.set_weights(weights)
            elif kept is not None and (seconds := load_public_weights(kept, model)) is not None:
                self._public_seconds[seed] = seconds
                _TRAINED_PUBLIC[key] = (model.get_weights(), seconds)
            else:
                model.fit(self.x_public, self.y_public, epochs=recipe["epochs"], batch_size=recipe["batch_size"],
                          verbose=0)
                self._public_seconds[seed] = time.perf_counter() - started
                _TRAINED_PUBLIC[key] = (model.get_weights(), self._public_seconds[seed])
                if kept is not None:
                    save_public_weights(kept, model, self._public_seconds[seed])
            self._public_models[seed] = model
            self._public_spent[seed] = time.perf_counter() - started
        return self._public_models[seed]

    def public_training_seconds(self, seed: int) -> float | None:
        """Wall-clock seconds the public model of ``seed`` took to train (once; ε = 0 for the private set),
        or None when it has not been trained. No method's own time includes it: it is reported beside."""
        return self._public_seconds.get(seed)

    def public_seconds_spent(self, seed: int) -> float | None:
        """Wall-clock seconds this context spent getting the public model of ``seed``: its training, or only a
        copy or a load where it was trained before (:data:`_TRAINED_PUBLIC`, :mod:`.public_cache`); None before."""
        return self._public_spent.get(seed)


def _one_hot(labels, num_classes) -> np.ndarray:
    return np.eye(num_classes, dtype=np.float32)[np.asarray(labels, dtype=np.int64)]


def _image_context(config, name: str) -> Context:
    splits = image_data.load(name)
    public = config.public
    x_pub = np.zeros((0, *splits.x_train.shape[1:]), np.float32)
    y_pub = np.zeros((0, splits.num_classes), np.float32)
    x_priv, y_priv, source = splits.x_train, splits.y_train, "none"
    if isinstance(public, int) and public > 0:
        n_train = len(splits.x_train)
        if config.batch_size >= n_train:  # no --public could leave a whole batch: the batch size is the mistake
            raise ValueError(f"batch_size={config.batch_size} is not below the {n_train} training records of {name}; "
                             "pass a smaller --batch-size")
        if not public < n_train - config.batch_size:
            raise ValueError(f"public={public} must leave at least one batch of {config.batch_size} private records "
                             f"(the training split of {name} has {n_train}); pass a smaller --public")
        # the first `public` training records are public; the private set is the disjoint rest
        x_pub, y_pub, x_priv, y_priv = (splits.x_train[:public], splits.y_train[:public],
                                        splits.x_train[public:], splits.y_train[public:])
        source = f"{public} records of the {name} training split (disjoint from the private set)"
    elif isinstance(public, str):
        if public not in PUBLIC_SOURCES:
            raise ValueError(f"public={public!r} is not a known public source; use a count or one of "
                             f"{sorted(PUBLIC_SOURCES)}")
        x_pub, y_pub = PUBLIC_SOURCES[public](splits.num_classes, splits.x_train.shape[1:])
        source = public
    return Context(config, name, "image", x_priv, y_priv, x_pub, y_pub, splits.x_test, splits.y_test,
                   splits.num_classes, source, splits.source)


def _tabular_context(config, name: str) -> Context:
    d = data_tabular.load_tabular(name, data_tabular.TabularConfig(**getattr(config, "tabular", {}) or {}))
    k = d["num_classes"]
    if config.public not in (None, 0, "none"):
        raise ValueError(f"public={config.public!r}: the tabular datasets have no public split; pass --public 0")
    empty = np.zeros((0, d["x_train"].shape[1]), np.float32)
    return Context(config, name, "tabular", d["x_train"].astype(np.float32), _one_hot(d["y_train"], k),
                   empty, np.zeros((0, k), np.float32), d["x_test"].astype(np.float32), _one_hot(d["y_test"], k),
                   k, "none", d["note"])


def build_context(config, name: str) -> Context:
    """Load dataset ``name`` once and split it into private, public and test records.

    ``config.options`` may cap the private and test sets (``max_private``, ``max_test``) for a quick
    run of the same code path; the first records are kept (the splits are already shuffled).
    """
    kind = dataset_kind(name)
    if kind == "text":
        ctx = Context(config, name, "text", **text_context(config, name))
    else:
        ctx = _image_context(config, name) if kind == "image" else _tabular_context(config, name)
    options = getattr(config, "options", {}) or {}
    if options.get("max_private"):
        k = int(options["max_private"])
        ctx.x_private, ctx.y_private = ctx.x_private[:k], ctx.y_private[:k]
    if options.get("max_test"):
        k = int(options["max_test"])
        ctx.x_test, ctx.y_test = ctx.x_test[:k], ctx.y_test[:k]
    ctx.user_ids = user_ids_for(options, ctx.n_private)
    return ctx
