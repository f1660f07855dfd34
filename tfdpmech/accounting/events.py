"""``dp_accounting`` events: their JSON form, and the composition of several at one δ.

A :class:`~tfdpmech.accounting.ledger.Release` may carry the ``dp_accounting.DpEvent`` that its
provable guarantee rests on (``GaussianDpEvent``, ``LaplaceDpEvent``, ``PoissonSampledDpEvent``,
``SelfComposedDpEvent``, ``ComposedDpEvent``, ...). :func:`compose_events` composes such events
with ``dp_accounting``'s accountants and keeps the smallest ε among the bounds that apply:

* ``"rdp"``: ``dp_accounting.rdp.RdpAccountant`` (Rényi DP; the orders of :mod:`.rdp_orders`, which give the
  default orders' ε);
* ``"pld"``: ``dp_accounting.pld.PLDAccountant`` (privacy-loss distributions, pessimistic
  discretisation, so its ε is an upper bound; the grid step grows with the RDP ε, at most 0.01, to
  keep large compositions fast);
* ``"gaussian"``: when every event is a (self-)composition of plain Gaussian mechanisms, the
  composition is itself one Gaussian mechanism with ``1/σ_eff² = Σ count/σ_i²`` (Dong, Roth, Su 2022,
  Cor. 3.3; :func:`gaussian_mu` gives its μ-GDP ``μ = 1/σ_eff``), whose exact privacy curve
  ``dp_accounting.pld.privacy_loss_mechanism.GaussianPrivacyLoss`` gives (Balle & Wang 2018).

``"best"`` (the ledger's default) keeps the smallest of the three.

Each of these is a valid (ε, δ) bound, so their minimum is one too; none is ever replaced by a
smaller estimate. The composition assumes the events' own neighbouring relation is dp_accounting's
default, add-or-remove-one (a Gaussian or Laplace event folds its sensitivity into its noise
multiplier and reads the same under replace-one).

The JSON form of an event (:func:`event_to_json`) names its class and its fields, e.g.
``{"type": "GaussianDpEvent", "noise_multiplier": 1.1}``; :func:`event_from_json` accepts only the
event classes of ``dp_accounting.dp_event`` and validates every field.
"""

from __future__ import annotations

import functools
import json
import math
import numbers

from .gaussian import gaussian_epsilon, require_dp_accounting
from .rdp_orders import rdp_epsilon

__all__ = [
    "COMPOSITION_ACCOUNTANTS",
    "is_dp_event",
    "event_to_json",
    "event_from_json",
    "self_composed",
    "gaussian_mu",
    "compose_events",
    "event_epsilon_floor",
]

COMPOSITION_ACCOUNTANTS = ("best", "rdp", "pld")
_PURPOSE = "composing the ledger's dp_accounting events"
_INT_FIELDS = {"count", "source_dataset_size", "sample_size"}


def _dp_event_module():
    return require_dp_accounting(_PURPOSE).dp_event


def is_dp_event(value) -> bool:
    """True for an instance of ``dp_accounting.DpEvent`` (imports dp_accounting only if needed)."""
    if value is None or isinstance(value, (bool, numbers.Number, str, dict, list, tuple)):
        return False
    return isinstance(value, _dp_event_module().DpEvent)


def _fields(cls):
    import attr

    return attr.fields(cls)


def event_to_json(event) -> dict:
    """``{"type": <class name>, <field>: <value>, ...}``, nested events as nested objects."""
    if not is_dp_event(event):
        raise TypeError(f"event must be a dp_accounting.DpEvent, got {type(event).__name__}")
    out = {"type": type(event).__name__}
    for field in _fields(type(event)):
        out[field.name] = _value_to_json(getattr(event, field.name))
    return out


def _value_to_json(value):
    if is_dp_event(value):
        return event_to_json(value)
    if isinstance(value, (list, tuple)):
        return [_value_to_json(v) for v in value]
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    raise TypeError(f"cannot write the event field value {value!r} as JSON")


def _event_classes() -> dict:
    module = _dp_event_module()
    return {
        name: cls for name, cls in vars(module).items()
        if isinstance(cls, type) and issubclass(cls, module.DpEvent) and cls is not module.DpEvent
    }


def event_from_json(data, where: str = "event"):
    """Rebuild a ``DpEvent`` from :func:`event_to_json`'s form, validating every field.

    Raises:
        ValueError: an unknown event type, a missing or extra field, a non-finite or negative
            number, a boolean or string where a number belongs.
    """
    if not isinstance(data, dict):
        raise ValueError(f"{where} must be a JSON object naming a dp_accounting event, got {type(data).__name__}")
    kind = data.get("type")
    classes = _event_classes()
    if kind not in classes:
        raise ValueError(f"{where}.type must be one of {sorted(classes)}, got {kind!r}")
    cls = classes[kind]
    names = [f.name for f in _fields(cls)]
    extra = sorted(set(data) - set(names) - {"type"})
    missing = [n for n in names if n not in data]
    if extra or missing:
        raise ValueError(f"{where} ({kind}) has unknown fields {extra} / lacks fields {missing}")
    kwargs = {n: _value_from_json(data[n], f"{where}.{n}", integral=n in _INT_FIELDS) for n in names}
    return cls(**kwargs)


def _value_from_json(value, where: str, *, integral: bool):
    if isinstance(value, dict):
        return event_from_json(value, where)
    if isinstance(value, list):
        return [_value_from_json(v, f"{where}[{i}]", integral=integral) for i, v in enumerate(value)]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where} must be a number, got {type(value).__name__} {value!r}")
    if integral:
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"{where} must be a non-negative integer, got {value!r}")
        return value
    try:
        number = float(value)
    except OverflowError:
        raise ValueError(f"{where} is a number too large for a float ({len(str(value))} digits)") from None
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"{where} must be a finite number >= 0, got {value!r}")
    return number


def self_composed(event, count: int):
    """``event`` repeated ``count`` times (the event itself for ``count == 1``)."""
    if count == 1:
        return event
    return _dp_event_module().SelfComposedDpEvent(event, int(count))


def _gaussian_precision(event) -> float | None:
    """``Σ 1/σ_i²`` when ``event`` is a (self-)composition of plain Gaussian events, else None."""
    module = _dp_event_module()
    if isinstance(event, module.GaussianDpEvent):
        return math.inf if event.noise_multiplier == 0 else 1.0 / event.noise_multiplier**2
    if isinstance(event, module.SelfComposedDpEvent):
        inner = _gaussian_precision(event.event)
        return None if inner is None else event.count * inner
    if isinstance(event, module.ComposedDpEvent):
        parts = [_gaussian_precision(e) for e in event.events]
        return None if any(p is None for p in parts) else float(sum(parts))
    if isinstance(event, module.NoOpDpEvent):
        return 0.0
    return None


def gaussian_mu(events) -> float | None:
    """μ of the μ-GDP guarantee of ``events`` (a sequence of ``DpEvent``) when every one is a
    (self-)composition of plain Gaussian events: ``μ = √(Σ count/σ_i²)``; None for any other event.

    One Gaussian event of noise multiplier σ is exactly (1/σ)-GDP, and GDP composes by adding μ²
    (Dong, Roth, Su 2022, Cor. 3.3).
    """
    parts = [_gaussian_precision(e) for e in events]
    if any(p is None for p in parts):
        return None
    return math.sqrt(float(sum(parts)))


def _pld_interval(rdp_epsilon: float) -> float:
    if not math.isfinite(rdp_epsilon):
        return 1e-4
    return min(max(1e-4, 2e-4 * rdp_epsilon), 1e-2)


@functools.lru_cache(maxsize=256)
def _compose_cached(key: str, delta: float, accountant: str) -> tuple[tuple[str, float], ...]:
    dp_accounting = require_dp_accounting(_PURPOSE)
    event = event_from_json(json.loads(key))
    results = []
    rdp_eps = math.inf
    if accountant in ("best", "rdp"):
        if dp_accounting.rdp.RdpAccountant().supports(event):
            rdp_eps = rdp_epsilon(dp_accounting, event, delta)
            results.append(("RDP (dp_accounting.rdp.RdpAccountant)", rdp_eps))
    if accountant in ("best", "pld"):
        interval = _pld_interval(rdp_eps)
        acc = dp_accounting.pld.PLDAccountant(value_discretization_interval=interval)
        if acc.supports(event):
            acc.compose(event)
            results.append((f"PLD (dp_accounting.pld.PLDAccountant, pessimistic, grid {interval:.2g})",
                            float(acc.get_epsilon(delta))))
    if accountant in ("best", "gaussian"):
        mu = gaussian_mu([event])
        if mu is not None and 0 < mu < math.inf:
            results.append(("one Gaussian mechanism with 1/σ² = Σ 1/σ_i², exact privacy curve "
                            "(dp_accounting GaussianPrivacyLoss)", gaussian_epsilon(1.0 / mu, delta)))
        elif mu == 0:
            results.append(("no-op events", 0.0))
    return tuple(results)


def compose_events(events, delta: float, accountant: str = "best") -> tuple[float, str] | None:
    """Compose ``events`` (a sequence of ``DpEvent``) at ``delta``; the smallest valid ε and how.

    Args:
        events: the events, each already self-composed for its repetitions.
        delta: the δ of the composed guarantee, in (0, 1).
        accountant: ``"best"`` (the smallest of RDP, PLD and, for Gaussian-only events, the exact
            Gaussian curve), ``"rdp"``, ``"pld"`` or ``"gaussian"`` (the exact curve only).

    Returns:
        ``(epsilon, description)``, or None when no accountant supports the events.
    """
    events = list(events)
    if not events:
        return 0.0, "no events"
    event = events[0] if len(events) == 1 else _dp_event_module().ComposedDpEvent(events)
    key = json.dumps(event_to_json(event), sort_keys=True)
    results = [(eps, how) for how, eps in _compose_cached(key, float(delta), accountant)]
    if not results:
        return None
    eps, how = min(results, key=lambda r: r[0])
    return eps, how


def event_epsilon_floor(event, delta: float) -> float | None:
    """The exact ε at ``delta`` of a single Gaussian or Laplace event (no stated ε may be smaller).

    Returns None for other events, and for a Laplace event at δ > 0 (no exact curve checked).
    ``delta = 0`` gives ``inf`` for a Gaussian event (no pure-ε guarantee) and ``1/b`` for a
    Laplace event of noise multiplier ``b`` (Laplace scale over L1 sensitivity).
    """
    module = _dp_event_module()
    if isinstance(event, module.LaplaceDpEvent):
        if delta > 0:
            return None  # at δ > 0 a Laplace mechanism's ε is below 1/b; no floor is checked
        return math.inf if event.noise_multiplier == 0 else 1.0 / event.noise_multiplier
    if isinstance(event, module.GaussianDpEvent):
        if delta <= 0 or event.noise_multiplier == 0:
            return math.inf
        return gaussian_epsilon(event.noise_multiplier, delta)
    return None
