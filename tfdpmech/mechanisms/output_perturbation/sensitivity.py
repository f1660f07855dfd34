"""Sensitivity bounds of Lu et al.'s output perturbation, read from a Keras model.

Lu, Asghar, Kaafar, Webb, Dickinson, "A Differentially Private Framework for Deep Learning with
Convexified Loss Functions", §4.2–4.3 (Theorem 4, Eqs. 15–21) and §5.2 (Eq. 30). Why none of the
bounds is a proof for a full MLP: ``docs/mechanisms/output_perturbation.md``.

For an MLP ``m → V_1 → … → V_{T−1} → C`` with bounded hidden activations (``|a| ≤ a_u``), inputs
scaled to ``|x_j| ≤ x_0`` and an L2 penalty ``c·‖W‖²`` on every kernel:

1. ``ρ = (C−1)·Π_{t<T}(√|V_t|·x_t) / (C·|V_{T−1}|)``                      (Eq. 21)
2. ``λ = c/2`` (paper convention, reproduces Table 6) or ``λ = 2c`` (exact)   (Lemma 1, Eq. 23)
3. ``Δ₂W = 2ρ/(λn)``                                                        (Eq. 15)
4. ``Δω = Δ₂W/√|W|``, ``|W|`` = kernel weights only                          (Eq. 18)
5. ``Δz_T = a_u·|V_{T−1}|·Δω``                                               (Cor. 1, Eq. 19)
6. ``Δp = min(exp(2Δz_T) − 1, 1)``                                          (Cor. 2, Eq. 20)
7. ``OARO = 2ρ²/(λn)``                                                      (Thm 4, Eq. 30)

None of these is a proof for a full MLP: Eq. 18 does not follow from an L2 bound and Cor. 1
ignores changes in the hidden layers; Theorem 4 needs an exact minimiser of a strongly convex
objective, which neither the network nor Adam provides (Theorem 5 shows convexity only in regions);
biases are not regularised.
``sensitivity_mode="output_layer_cs"`` replaces steps 4–5 by the Cauchy–Schwarz bound
``Δz_T = a_u·√|V_{T−1}|·Δ₂W``, which is sound for the output layer alone but still ignores hidden
layer changes. :attr:`OutputPerturbationBounds.proven` is therefore always False and ``basis``
says which bound was used.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Sequence

import keras
import numpy as np

from .convexified_mlp import LINEAR_ACTIVATIONS, activation_name
from ...validation import check_choice, check_positive_int, check_positive_real

__all__ = [
    "OutputPerturbationBounds",
    "bounds_from_architecture",
    "compute_bounds",
    "describe_mlp",
    "LAMBDA_CONVENTIONS",
    "SENSITIVITY_MODES",
    "BOUNDED_ACTIVATIONS",
]

LAMBDA_CONVENTIONS = ("paper", "exact")
SENSITIVITY_MODES = ("paper", "output_layer_cs")
BOUNDED_ACTIVATIONS = {"tanh": 1.0, "sigmoid": 1.0, "softsign": 1.0, "hard_sigmoid": 1.0}

_BASIS = {
    "paper": (
        "Lu et al. Eq. 15 + Eq. 18 + Cor. 1 (per-parameter split Δω = Δ₂W/√|W|, hidden activations assumed "
        "unchanged): not a valid bound for a full MLP (docs/mechanisms/output_perturbation.md)"
    ),
    "output_layer_cs": (
        "Lu et al. Eq. 15 + Cauchy–Schwarz on the output layer (Δz_T = a_u·√H·Δ₂W): sound for the output layer "
        "given Δ₂W, but ignores hidden-layer changes and needs an exact minimiser of a strongly convex "
        "objective (Theorem 4; docs/mechanisms/output_perturbation.md)"
    ),
}


@dataclasses.dataclass(frozen=True)
class OutputPerturbationBounds:
    """Sensitivities of Lu et al.'s Algorithm 1 and the facts they were computed from.

    Attributes:
        rho: Lipschitz constant ρ of the loss (Eq. 21).
        lambda_: strong-convexity constant λ used.
        delta2_w: L2 sensitivity Δ₂W of the parameter vector (Eq. 15).
        delta_omega: sensitivity Δω of one parameter (Eq. 18, or Δ₂W in ``output_layer_cs``).
        delta_z: sensitivity Δz_T of one output logit (Cor. 1 or Cauchy–Schwarz).
        delta_p: sensitivity Δp of one probability, capped at 1 (Cor. 2).
        delta_p_raw: ``exp(2Δz_T) − 1`` before the cap.
        oaro_bound: OARO stability bound 2ρ²/(λn) (Eq. 30).
        layer_widths: ``(m, V_1, …, V_{T−1}, C)``.
        layer_maxima: ``x_t`` for t = 0..T−1.
        num_weights: ``|W|`` (kernels only unless ``count_bias``).
        n_train: training set size n.
        l2: the Keras L2 coefficient c.
        activation_bound: a_u.
        lambda_convention, sensitivity_mode, count_bias: the options used.
        proven: always False: no mode is a proof for a full MLP (Eq. 18, Corollary 1, Theorem 4).
        basis: the argument behind the numbers and why it is not a proof.
    """

    rho: float
    lambda_: float
    delta2_w: float
    delta_omega: float
    delta_z: float
    delta_p: float
    delta_p_raw: float
    oaro_bound: float
    layer_widths: tuple
    layer_maxima: tuple
    num_weights: int
    n_train: int
    l2: float
    activation_bound: float
    lambda_convention: str
    sensitivity_mode: str
    count_bias: bool
    proven: bool
    basis: str

    @property
    def num_classes(self) -> int:
        return int(self.layer_widths[-1])

    @property
    def input_dim(self) -> int:
        return int(self.layer_widths[0])

    @property
    def input_bound(self) -> float:
        """x_0: the bound on |x_j| the inputs must respect."""
        return float(self.layer_maxima[0])

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["layer_widths"] = list(self.layer_widths)
        out["layer_maxima"] = list(self.layer_maxima)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "OutputPerturbationBounds":
        data = dict(data)
        data["layer_widths"] = tuple(int(v) for v in data["layer_widths"])
        data["layer_maxima"] = tuple(float(v) for v in data["layer_maxima"])
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls)})

    def save(self, path) -> None:
        """Write the bounds as JSON next to the model (re-deriving them later may change n or λ)."""
        with open(path, "w") as fh:
            json.dump(self.to_dict(), fh, indent=2)

    @classmethod
    def load(cls, path) -> "OutputPerturbationBounds":
        with open(path) as fh:
            return cls.from_dict(json.load(fh))


def bounds_from_architecture(layer_widths: Sequence[int], n_train: int, l2: float, *,
                             activation_bound: float = 1.0, input_bound: float = 1.0,
                             layer_maxima: Sequence[float] | None = None, lambda_convention: str = "paper",
                             sensitivity_mode: str = "paper", count_bias: bool = False) -> OutputPerturbationBounds:
    """Steps 1–7 of the module docstring from the architecture's widths and the training facts.

    Args:
        layer_widths: ``(m, V_1, …, V_{T−1}, C)``: input features, hidden widths, classes (C ≥ 2).
        n_train: the actual training set size n (after any validation split).
        l2: the Keras ``L2`` coefficient c on every kernel.
        activation_bound: a_u, the bound on |hidden activation| (1 for tanh/sigmoid).
        input_bound: x_0, the bound on |x_j| the inputs are scaled to.
        layer_maxima: x_t for every layer t < T; overrides ``input_bound``/``activation_bound``.
            Taking them from the private data (the "empirical maximum" of Eq. 21) makes ρ
            data-dependent: use for OARO only.
        lambda_convention: ``"paper"`` (λ = c/2, reproduces Table 6) or ``"exact"`` (λ = 2c).
        sensitivity_mode: ``"paper"`` (Eq. 18 + Cor. 1) or ``"output_layer_cs"`` (Cauchy–Schwarz on
            the output layer).
        count_bias: count biases in |W| (the paper's numbers exclude them).

    Returns:
        An :class:`OutputPerturbationBounds`.

    Raises:
        ValueError / TypeError: n ≤ 0, c ≤ 0, fewer than 2 classes or 2 widths, non-positive bounds,
            unknown options, or ``layer_maxima`` of the wrong length.
    """
    widths = [check_positive_int(w, f"layer_widths[{i}]") for i, w in enumerate(layer_widths)]
    if len(widths) < 2:
        raise ValueError(f"layer_widths must list at least (m, C), got {list(layer_widths)}")
    if widths[-1] < 2:
        raise ValueError(f"the output layer must have C >= 2 classes, got {widths[-1]}")
    n = check_positive_int(n_train, "n_train")
    c = check_positive_real(l2, "l2")
    a_u = check_positive_real(activation_bound, "activation_bound")
    x0 = check_positive_real(input_bound, "input_bound")
    check_choice(lambda_convention, "lambda_convention", LAMBDA_CONVENTIONS)
    check_choice(sensitivity_mode, "sensitivity_mode", SENSITIVITY_MODES)
    layers_below_output = len(widths) - 1  # T: layers 0..T-1 feed the products of Eq. 21
    if layer_maxima is None:
        maxima = [x0] + [a_u] * (layers_below_output - 1)
    else:
        maxima = [check_positive_real(v, f"layer_maxima[{i}]") for i, v in enumerate(layer_maxima)]
        if len(maxima) != layers_below_output:
            raise ValueError(
                f"layer_maxima must give x_t for the {layers_below_output} layers below the output "
                f"(input and hidden layers), got {len(maxima)}"
            )
    num_classes, fan_in = widths[-1], widths[-2]
    a_last = maxima[-1]  # bound on the activations feeding the output layer

    # 1. Eq. 21 (no bias neuron in |V_t|, as the paper's numbers)
    prod = 1.0
    for width, x_t in zip(widths[:-1], maxima):
        prod *= math.sqrt(width) * x_t
    rho = (num_classes - 1) * prod / (num_classes * fan_in)
    # 2. λ from the Keras coefficient (Eq. 23's 2λ‖W‖² read as Keras c‖W‖² by the paper, so λ = c/2)
    lam = c / 2.0 if lambda_convention == "paper" else 2.0 * c
    # 3. Eq. 15
    delta2_w = 2.0 * rho / (lam * n)
    num_weights = sum(a * b for a, b in zip(widths[:-1], widths[1:]))
    if count_bias:
        num_weights += sum(widths[1:])
    # 4.–5. Eq. 18 + Cor. 1, or Cauchy–Schwarz on the output layer
    if sensitivity_mode == "paper":
        delta_omega = delta2_w / math.sqrt(num_weights)
        delta_z = a_last * fan_in * delta_omega
    else:
        delta_omega = delta2_w
        delta_z = a_last * math.sqrt(fan_in) * delta2_w
    # 6. Cor. 2
    delta_p_raw = math.expm1(2.0 * delta_z) if delta_z < 350 else math.inf
    delta_p = min(delta_p_raw, 1.0)
    # 7. Eq. 30
    oaro = 2.0 * rho**2 / (lam * n)
    return OutputPerturbationBounds(
        rho=float(rho), lambda_=float(lam), delta2_w=float(delta2_w), delta_omega=float(delta_omega),
        delta_z=float(delta_z), delta_p=float(delta_p), delta_p_raw=float(delta_p_raw), oaro_bound=float(oaro),
        layer_widths=tuple(widths), layer_maxima=tuple(float(v) for v in maxima), num_weights=int(num_weights),
        n_train=n, l2=c, activation_bound=float(a_u), lambda_convention=lambda_convention,
        sensitivity_mode=sensitivity_mode, count_bias=bool(count_bias), proven=False,
        basis=_BASIS[sensitivity_mode] + f"; λ convention {lambda_convention!r}",
    )


def _regularizer_l2(layer) -> float | None:
    reg = getattr(layer, "kernel_regularizer", None)
    if reg is None:
        return None
    cfg = reg.get_config() if hasattr(reg, "get_config") else {}
    l1 = float(cfg.get("l1", 0.0) or 0.0)
    if l1:
        raise ValueError(
            f"layer {layer.name!r} has an L1 kernel penalty (l1={l1}); the bound needs a pure L2 penalty, "
            "use kernel_regularizer=keras.regularizers.L2(c)"
        )
    if "l2" not in cfg:
        raise ValueError(
            f"layer {layer.name!r} has a kernel_regularizer {type(reg).__name__} that is not L2; "
            "use kernel_regularizer=keras.regularizers.L2(c)"
        )
    # Keras 2 stores the coefficient as float32 (0.001 -> 0.0010000000475); recover the decimal value
    return float(str(np.float32(cfg["l2"])))


def describe_mlp(model) -> dict:
    """Read widths, activations and L2 coefficients of a Dense MLP, refusing anything else.

    Accepted layers: ``InputLayer``, ``Flatten``, ``Dense`` and ``Activation`` (softmax/linear on
    the output, or a bounded activation after a linear hidden Dense).

    Returns:
        dict with ``widths`` (m, hidden…, C), ``hidden_activations``, ``l2`` (one per Dense),
        ``output_activation`` and ``use_bias``.

    Raises:
        TypeError: ``model`` is not a built Keras model.
        ValueError: an unsupported layer (Conv, Dropout, BatchNorm, …) or activation (ReLU, …), a
            non-linear output other than softmax, or a Dense without an L2 kernel penalty.
    """
    if not isinstance(model, keras.Model):
        raise TypeError(f"model must be a keras.Model, got {type(model).__name__}")
    if not model.built or not model.inputs:
        raise ValueError("model must be built with a known input shape; build it with keras.Input(shape=(m,))")
    input_shape = tuple(model.inputs[0].shape[1:])
    if any(s is None for s in input_shape):
        raise ValueError(f"the model input shape {input_shape} must be fully known")
    m = int(np.prod(input_shape))
    widths, acts, l2s, use_bias = [m], [], [], []
    pending = None  # activation of the last Dense, possibly overridden by a following Activation layer
    layers = [l for l in model.layers if not isinstance(l, keras.layers.InputLayer)]
    for layer in layers:
        if isinstance(layer, keras.layers.Flatten):
            if len(widths) > 1:
                raise ValueError(f"Flatten layer {layer.name!r} after a Dense layer is not supported")
            continue
        if isinstance(layer, keras.layers.Dense):
            if len(layer.kernel.shape) != 2 or int(layer.kernel.shape[0]) != widths[-1]:
                raise ValueError(f"Dense layer {layer.name!r} does not act on a flat vector of {widths[-1]} features")
            if pending is not None:
                acts.append(pending)
            widths.append(int(layer.units))
            l2s.append(_regularizer_l2(layer))
            use_bias.append(bool(layer.use_bias))
            pending = activation_name(layer)
            continue
        if isinstance(layer, keras.layers.Activation):
            if pending not in LINEAR_ACTIVATIONS:
                raise ValueError(f"Activation layer {layer.name!r} follows a non-linear Dense; not supported")
            pending = activation_name(layer)
            continue
        raise ValueError(
            f"layer {layer.name!r} ({type(layer).__name__}) is not covered by the sensitivity bound; the bound holds "
            "only for fully connected MLPs (Dense layers with tanh/sigmoid hidden activations, no Dropout, "
            "BatchNormalization, convolutions or other layers)"
        )
    if len(widths) < 2:
        raise ValueError("the model has no Dense layer; the bound needs an MLP ending in Dense(C)")
    output_activation = pending
    if output_activation not in LINEAR_ACTIVATIONS + ("softmax",):
        raise ValueError(
            f"the output layer must be linear (logits) or softmax, got activation {output_activation!r}"
        )
    for i, act in enumerate(acts):
        if act not in BOUNDED_ACTIVATIONS:
            raise ValueError(
                f"hidden layer {i + 1} uses activation {act!r}, which is not bounded; the bound needs "
                f"|activation| <= a_u, use one of {sorted(BOUNDED_ACTIVATIONS)} (ReLU/GELU/linear are not covered)"
            )
    return {"widths": widths, "hidden_activations": acts, "l2": l2s, "output_activation": output_activation,
            "use_bias": use_bias}


def compute_bounds(model, n_train: int, l2: float | None = None, *, input_bound: float = 1.0,
                   layer_maxima: Sequence[float] | None = None, lambda_convention: str = "paper",
                   sensitivity_mode: str = "paper", count_bias: bool = False) -> OutputPerturbationBounds:
    """Sensitivity bounds for a trained Keras MLP (Lu et al. Eq. 15, 18–21, 30).

    Reads the widths, the hidden activations and the L2 kernel penalty from ``model`` and refuses
    architectures the bound does not cover.

    Args:
        model: a built Keras MLP ``[Flatten] → Dense(tanh|sigmoid)… → Dense(C[, softmax])``
            with ``kernel_regularizer=L2(c)`` on every Dense.
        n_train: the number of records the model was actually trained on.
        l2: the expected L2 coefficient c; None reads it from the model. A mismatch is refused.
        input_bound: x_0, the bound on |x_j| (the predictor refuses inputs beyond it).
        layer_maxima, lambda_convention, sensitivity_mode, count_bias: see
            :func:`bounds_from_architecture`.

    Returns:
        An :class:`OutputPerturbationBounds` (``proven`` is False; see ``basis``).

    Raises:
        ValueError / TypeError: unsupported layers or activations, a missing or mismatched (or
            non-uniform) L2 penalty, n ≤ 0, unknown options.
    """
    info = describe_mlp(model)
    found = info["l2"]
    missing = [i for i, v in enumerate(found) if v is None or v == 0.0]
    if missing:
        raise ValueError(
            f"Dense layer(s) {missing} have no L2 kernel penalty; the bound (Eq. 15) needs a strongly convex "
            "objective: train with kernel_regularizer=keras.regularizers.L2(c) on every Dense layer"
        )
    if max(found) - min(found) > 1e-6 * max(found):
        raise ValueError(f"the L2 coefficients differ between layers ({found}); use the same L2(c) on every Dense")
    c_model = found[0]
    if l2 is not None:
        l2 = check_positive_real(l2, "l2")
        if not math.isclose(l2, c_model, rel_tol=1e-5):
            raise ValueError(
                f"l2={l2} does not match the model's kernel_regularizer L2({c_model:g}); the bound must use the "
                "coefficient the model was trained with"
            )
    acts = info["hidden_activations"]
    # with no hidden layer the output layer reads the inputs, bounded by x_0
    a_u = max(BOUNDED_ACTIVATIONS[a] for a in acts) if acts else input_bound
    return bounds_from_architecture(
        info["widths"], n_train, c_model, activation_bound=a_u, input_bound=input_bound, layer_maxima=layer_maxima,
        lambda_convention=lambda_convention, sensitivity_mode=sensitivity_mode, count_bias=count_bias,
    )
