"""A proven private normalisation of ScatterNet features: per-channel mean and variance over the private set.

Tramèr & Boneh (ICLR 2021) normalise the 81 scattering channels on MNIST by a mean and a variance computed
over the whole training set with noise (``input_norm=BN``): each record's per-channel mean vector and
per-channel mean-square vector are clipped to a threshold, summed, and Gaussian noise of σ_bn times the
threshold is added to each sum. Their thresholds are the *median* of the records' norms, a statistic of the
private data that their accounting does not charge, so as written it is no proof. Here the thresholds do not
depend on the data:

- **Bound.** For an image ``x`` in [0, 1] (the loaders' scale: pixels divided by the public bound 255),
  every scattering coefficient is a chain of circular convolutions on kymatio's padded grid (reflection
  padding keeps the values in [0, 1]), moduli, real parts and subsamplings. A circular convolution obeys
  ``|x ⊛ g| <= max|x| · ||g||_1``, a modulus, a real part or a subsampling never raises the largest
  absolute value, so channel ``c`` (path of filters ``g_1, ..., g_k`` then the low-pass ``φ``) satisfies
  ``0 <= S_c(x)(u) <= B_c = Π ||g_i||_1`` (each filter's L1 norm on the grid of its resolution, computed by
  :func:`scattering_bounds` from kymatio's filter bank: about 1 for every channel at J = 2 on 28×28). Then a
  record's per-channel mean ``m_c`` lies in ``[0, B_c]`` and its mean square ``s_c`` in ``[0, B_c²]``, so
  ``||m||_2 <= ||B||_2`` and ``||s||_2 <= ||B²||_2``: those are the thresholds (:func:`bn_thresholds`). Each
  record's vectors are still clipped to them, so the sensitivity below holds for any input whatever the bound.
- **Release.** ``Σ_i m_i / ||B||_2`` and ``Σ_i s_i / ||B²||_2``: adding or removing one record moves each
  sum by at most 1 in L2; Gaussian noise N(0, σ_bn²) on every coordinate of each: two Gaussian mechanisms of
  noise multiplier σ_bn (``SelfComposedDpEvent(GaussianDpEvent(σ_bn), 2)``), recorded in the ledger as one
  proven release (add-or-remove neighbours, as DP-SGD's) that the ledger composes with DP-SGD's event. Drawn
  once, before training.
- **Post-processing.** ``mean = noisy sum · ||B||_2 / n`` and ``square = noisy sum · ||B²||_2 / n``, with
  ``n`` the number of private records treated as public (as DP-SGD's sampling probability q = L / n does);
  ``variance = max(square − mean², VARIANCE_FLOOR)`` (``VARIANCE_FLOOR = 1e-5``, the constant Tramèr &
  Boneh add to the variance before its square root); every record (training and test) is then normalised as
  ``(S_c − mean_c) / sqrt(variance_c)``.

The threshold covers every image in [0, 1], so it is far above the typical record's norms: with
σ_bn = 8 and 55,000 records the noise on a channel's mean square has a standard deviation of about
``8 · ||B²||_2 / 55,000 ≈ 1.3e-3``, more than most second-order channels' variance. The floor keeps those
channels at a bounded scale; the validation sweep (``tools/scatter_tuning.py``) measures what it costs.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from ..accounting.events import compose_events
from ..accounting.gaussian import require_dp_accounting
from ..accounting.ledger import PrivacyLedger, Release
from ..contract import release
from ..validation import check_choice, check_delta, check_positive_int, check_positive_real

__all__ = ["NORMALISATIONS", "BN_NOISE_MULTIPLIER", "VARIANCE_FLOOR", "ScatterStatistics", "scattering_bounds",
           "bn_thresholds", "record_statistics", "normalisation_event", "private_scatter_statistics",
           "normalise_channels", "check_normalisation"]

NORMALISATIONS = ("group", "private_bn")  # per-record group norm (ε = 0); private per-channel mean and variance
BN_NOISE_MULTIPLIER = 8.0  # σ_bn of each of the two sums (Tramèr & Boneh's --bn_noise_multiplier=8)
VARIANCE_FLOOR = 1e-5  # the smallest variance a channel is divided by (post-processing of the noisy statistics)


@dataclasses.dataclass(frozen=True)
class ScatterStatistics:
    """The released per-channel statistics: ``mean`` and ``variance`` (floored), each ``(channels,)`` float64,
    and the ledger's :class:`~tfdpmech.accounting.ledger.Release` that charged them."""

    mean: np.ndarray
    variance: np.ndarray
    release: Release


def check_normalisation(name) -> str:
    """``name`` if it is one of :data:`NORMALISATIONS`, else ValueError naming ``scatter_norm``."""
    return check_choice(name, "scatter_norm", NORMALISATIONS)


@functools.lru_cache(maxsize=8)
def _bounds(height: int, width: int, J: int, L: int) -> tuple:
    from .kymatio_compat import kymatio_tensorflow  # noqa: F401  (kymatio importable on this SciPy)
    from kymatio.scattering2d.filter_bank import filter_bank
    from kymatio.scattering2d.utils import compute_padding

    filters = filter_bank(*compute_padding(height, width, J), J, L)

    def l1(fourier) -> float:  # the spatial filter's L1 norm on its grid (circular convolution's bound)
        return float(np.abs(np.fft.ifft2(np.asarray(fourier, dtype=np.complex128))).sum())

    phi = [l1(level) for level in filters["phi"]["levels"]]
    psi = filters["psi"]
    bounds = [phi[0]]  # order 0: x ⊛ φ
    bounds += [l1(p["levels"][0]) * phi[p["j"]] for p in psi]  # order 1: |x ⊛ ψ_1| ⊛ φ
    bounds += [l1(p1["levels"][0]) * l1(p2["levels"][p1["j"]]) * phi[p2["j"]]  # order 2, kymatio's order
               for p1 in psi for p2 in psi if p2["j"] > p1["j"]]
    return tuple(bounds)


def scattering_bounds(shape=(28, 28), *, J: int = 2, L: int = 8) -> np.ndarray:
    """``B_c`` per scattering channel (kymatio's order): ``0 <= S_c(x) <= B_c`` for every image ``x`` in [0, 1].

    The product of the L1 norms of the channel's filters on kymatio's grids (see the module docstring);
    computed from the filter bank, which depends on ``shape``, ``J`` and ``L`` only (never on data).
    """
    height, width = (check_positive_int(s, f"shape[{i}]") for i, s in enumerate(tuple(shape)[:2]))
    return np.array(_bounds(height, width, check_positive_int(J, "J"), check_positive_int(L, "L")))


def bn_thresholds(bounds) -> tuple[float, float]:
    """``(||B||_2, ||B²||_2)``: the clipping thresholds of the per-record mean and mean-square vectors."""
    bounds = np.asarray(bounds, dtype=np.float64)
    return float(np.linalg.norm(bounds)), float(np.linalg.norm(bounds ** 2))


def record_statistics(coefficients) -> tuple[np.ndarray, np.ndarray]:
    """Each record's per-channel mean and mean square over the positions: two ``(n, channels)`` float64 arrays."""
    c = np.asarray(coefficients, dtype=np.float64)
    if c.ndim != 4:
        raise ValueError(f"coefficients must be (n, channels, H', W') scattering channels, got shape {c.shape}")
    flat = c.reshape(c.shape[0], c.shape[1], -1)
    return flat.mean(axis=2), (flat ** 2).mean(axis=2)


def _clip(rows: np.ndarray, threshold: float) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.maximum(norms / threshold, 1.0)


def normalisation_event(noise_multiplier: float):
    """The release's ``dp_accounting`` event: two Gaussian mechanisms of noise multiplier σ_bn."""
    dp_accounting = require_dp_accounting("the private ScatterNet normalisation")
    return dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(float(noise_multiplier)), 2)


def private_scatter_statistics(coefficients, *, noise_multiplier: float = BN_NOISE_MULTIPLIER, delta: float,
                               rng: np.random.Generator, ledger: PrivacyLedger, thresholds=None) -> ScatterStatistics:
    """Release the per-channel mean and variance of ``coefficients`` with Gaussian noise; record it in ``ledger``.

    Args:
        coefficients: ``(n, channels, H', W')`` scattering channels of the private records
            (:func:`~tfdpmech.features.scatter.scattering_channels`).
        noise_multiplier: σ_bn > 0 of each of the two sums.
        delta: the δ the release's own ε is stated at (the ledger composes its event at the ledger's δ).
        rng: the numpy Generator the noise is drawn from (secret outside experiments).
        ledger: the run's ledger; the release is recorded there before this returns.
        thresholds: ``(mean threshold, mean-square threshold)``, data-independent constants; None: the
            feature map's bound for 28×28 images at J = 2 (:func:`bn_thresholds` of :func:`scattering_bounds`
            for the coefficients' image size).

    Raises:
        ValueError: ``noise_multiplier`` <= 0 (or not finite), a bad ``delta``, ``thresholds`` not two positive
            reals, ``coefficients`` not 4-D; before anything is drawn or recorded.
    """
    noise_multiplier = check_positive_real(noise_multiplier, "noise_multiplier")
    delta = check_delta(delta)
    m, s = record_statistics(coefficients)
    n, channels = m.shape
    if thresholds is None:
        h, w = coefficients.shape[2] * 4, coefficients.shape[3] * 4  # J = 2: 2^J-times smaller per side
        bounds = scattering_bounds((h, w))
        if len(bounds) != channels:
            raise ValueError(f"coefficients have {channels} channels; the J = 2 bound has {len(bounds)}: pass "
                             "thresholds= for another transform")
        thresholds = bn_thresholds(bounds)
    if isinstance(thresholds, (str, bytes)) or len(tuple(thresholds)) != 2:
        raise ValueError(f"thresholds must be (mean threshold, mean-square threshold), got {thresholds!r}")
    c_mean, c_square = (check_positive_real(t, f"thresholds[{i}]") for i, t in enumerate(thresholds))
    event = normalisation_event(noise_multiplier)
    epsilon = compose_events([event], delta)[0]
    record = Release(
        component="scatter_normalisation", mechanism="gaussian", epsilon_claimed=epsilon, epsilon_provable=epsilon,
        basis=(f"per-channel mean and variance of the {channels} ScatterNet channels over the n={n} private records: "
               f"each record's per-channel mean vector clipped to L2 norm {c_mean:.6g} and mean-square vector to "
               f"{c_square:.6g} (data-independent: the scattering transform's bound for images in [0, 1]), each "
               f"sum divided by its threshold and released with Gaussian noise of multiplier σ={noise_multiplier:g} "
               "(two Gaussian mechanisms of sensitivity 1 under adding or removing one record, once, before "
               "training); n treated as public, as DP-SGD's q = L/n; the mean, variance (floored at "
               f"{VARIANCE_FLOOR:g}) and the normalised features are post-processing"),
        delta=delta, sensitivity=1.0, noise_scale=noise_multiplier, event=event, neighbours="add_remove",
        details={"records": n, "channels": channels, "mean_threshold": c_mean, "square_threshold": c_square,
                 "noise_multiplier": noise_multiplier, "variance_floor": VARIANCE_FLOOR})
    sums = {"mean": _clip(m, c_mean).sum(axis=0) / c_mean, "square": _clip(s, c_square).sum(axis=0) / c_square}
    released = release(ledger, record, value=sums, rng=rng)
    mean = released.value["mean"] * c_mean / n
    square = released.value["square"] * c_square / n
    variance = np.maximum(square - mean ** 2, VARIANCE_FLOOR)
    return ScatterStatistics(mean, variance, released.record)


def normalise_channels(coefficients, statistics: ScatterStatistics) -> np.ndarray:
    """``(S_c − mean_c) / sqrt(variance_c)`` per channel, flattened per record: ``(n, channels·H'·W')`` float32."""
    c = np.asarray(coefficients, dtype=np.float32)
    mean = statistics.mean.astype(np.float32)[None, :, None, None]
    scale = np.sqrt(statistics.variance).astype(np.float32)[None, :, None, None]
    return ((c - mean) / scale).reshape(len(c), -1).astype(np.float32)
