"""Named configurations of the one runner: ``tfdpmech compare --preset NAME [--quick]``.

Each preset is a set of :class:`~tfdpmech.experiments.runner.CompareConfig` overrides, with a
``quick`` variant that runs the same code path in seconds (used by the tests). Command-line flags
given next to ``--preset`` override the preset.
"""

from __future__ import annotations

import dataclasses

from .users import user_level_options

__all__ = ["Preset", "PRESETS", "register_preset", "preset_config"]


@dataclasses.dataclass(frozen=True)
class Preset:
    name: str
    description: str
    settings: dict
    quick: dict


PRESETS: dict[str, Preset] = {}


def register_preset(name: str, description: str, settings: dict, quick: dict) -> Preset:
    PRESETS[name] = Preset(name, description, dict(settings), dict(quick))
    return PRESETS[name]


# quick image runs: 1,200 private records and 2 epochs, DP-SGD's recipe for 2 epochs; the non-private reference
# trains for 60 epochs (240 steps, 88-90 % here) so that it stays the ceiling the private rows are read against
_QUICK_IMAGES = {"seeds": (0,), "epochs": 2,
                 "options": {"max_private": 1200, "max_test": 400, "dpsgd_epochs": 2, "nonprivate_epochs": 60}}

register_preset(
    "demo", "the main job: noise-once mechanisms next to DP-SGD on the embedded MNIST sample (MLP family)",
    {}, {**_QUICK_IMAGES, "epsilons": (1.0,), "public": 300})
register_preset(
    "dp_erm", "input perturbation (Kang et al.) against objective perturbation and DP-SGD on tabular data: "
              "L2-regularised logistic regression, T = epochs full-batch steps",
    {"datasets": ("breast_cancer", "iris", "synthetic"), "methods": ("nonprivate", "ip_reference", "ip_private",
                                                                      "kifer", "dpsgd"),
     "epsilons": (0.01, 0.1, 1.0), "seeds": (0, 1, 2, 3, 4), "epochs": 100, "model": "linear", "public": 0,
     "audit": ()},
    {"datasets": ("breast_cancer",), "seeds": (0,), "epochs": 20, "epsilons": (1.0,), "options": {"kifer_steps": 150}})
register_preset(
    "output_perturbation", "Lu et al.'s output perturbation (ε per query, none proven) next to the proven output "
                           "perturbation head and DP-SGD (ε per training run)",
    {"methods": ("nonprivate", "outpert_reference", "outpert_paper_bound", "outpert_head", "dpsgd"),
     "epsilons": (0.01, 1.0, 100.0),
     "seeds": (0, 1)},
    {**_QUICK_IMAGES, "epsilons": (1.0,), "public": 300})
register_preset(
    "pcdbn", "pCDBN (Phan et al.) on the embedded MNIST sample: CDBN, pCDBN in both modes, DP-SGD on the CNN",
    {"methods": ("cdbn", "pcdbn_private", "pcdbn_reference", "dpsgd"), "epsilons": (0.5, 2.0, 8.0), "seeds": (0,),
     "model": "cnn", "epochs": 3, "batch_size": 250, "learning_rate": 1e-3,
     "options": {"pretrain_epochs": 3, "head_epochs": 30}},
    {**_QUICK_IMAGES, "epsilons": (2.0,), "public": 300, "epochs": 1,
     "options": {"pretrain_epochs": 1, "head_epochs": 2, "max_private": 1200, "max_test": 400, "dpsgd_epochs": 1}})


def preset_config(name: str, *, quick: bool = False, **overrides):
    """A :class:`CompareConfig` for preset ``name`` (its quick variant if ``quick``), then ``overrides``."""
    from .runner import CompareConfig

    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose from {sorted(PRESETS)}")
    preset = PRESETS[name]
    settings = {**preset.settings, **(preset.quick if quick else {})}
    settings.update({k: v for k, v in overrides.items() if v is not None})
    return CompareConfig(preset=name, **settings)


# The papers' settings as far as the embedded MNIST sample and a CPU allow: 7,000 private images (the
# first 1,000 training images are public and train the relevance model), 2,000 test images. The
# accuracy-vs-step curve is accuracy_vs_step.png.
_REPRODUCE_QUICK = {"seeds": (0,), "epochs": 2, "batch_size": 200, "public": 300,
                    "options": {"max_private": 1200, "max_test": 400}}
register_preset(
    "reproduce-adlm", "AdLM and ILM as the authors' code trains them (Phan et al. Fig. 4): claimed ε = 0.3 split "
                      "1:1:2, batch 1,000, 429 epochs = 3,003 steps (code: batch 1,800, 80,001 steps on 55,000 images)",
    {"methods": ("adlm_reference", "ilm_reference"), "epsilons": (0.3,), "seeds": (0,), "model": "cnn",
     "batch_size": 1000, "epochs": 429, "public": 1000},
    _REPRODUCE_QUICK)
register_preset(
    "reproduce-afrrs", "AFRRS (Wang et al. Table 3, 98.80 % at ε = 0.6) on the AdLM authors' code path with AFRRS's "
                       "region budgets (γ = 0.1), and its per-record private mode; batch 1,000, 429 epochs (the "
                       "per-record mode proves ε = 3.49 per record at batch 1,000 on this CNN, so it is skipped; "
                       "batches <= 135 meet 0.6)",
    {"methods": ("afrrs_reference", "afrrs_per_record"), "epsilons": (0.6,), "seeds": (0,), "model": "cnn",
     "batch_size": 1000, "epochs": 429, "public": 1000, "options": {"gamma": 0.1}},
    # batch 120: the per-record mode meets ε = 0.6 (0.55 per record), so the quick run trains both modes
    {**_REPRODUCE_QUICK, "batch_size": 120, "options": {**_REPRODUCE_QUICK["options"], "gamma": 0.1}})
register_preset(
    "reproduce-pcdbn", "pCDBN as the authors' code trains it (Phan et al. Fig. 5b, 93.08 % at ε = 0.5): 10 "
                       "pre-training epochs per layer, 2,400 fine-tuning epochs at batch 3,500",
    {"methods": ("pcdbn_reference",), "epsilons": (0.5,), "seeds": (0,), "public": 1000,
     "options": {"pretrain_epochs": 10, "reference_epochs": 2400}},
    {"seeds": (0,), "public": 300,
     "options": {"pretrain_epochs": 1, "reference_epochs": 3, "max_private": 1200, "max_test": 400}})


# The whole MNIST (60,000 training images private, the 10,000 test images the test set), no public data;
# DP-SGD at Tramèr & Boneh's published recipe (tfdpmech.experiments.methods.mnist_recipes). Finished runs are kept
# in docs/results/mnist/runs.jsonl as they end, so the preset resumes after a kill.
_TB = "Tramèr & Boneh, ICLR 2021 (arXiv 2011.11660), Table 1 / their repository's README, δ = 1e-5"
_PHAN = "Phan et al., arXiv 1709.05750 (corrected), Fig. 4a"
_PHAN_CODE = "code: Adam 3e-4, batch 1,800, 80,001 steps on 55,000 images"
MNIST_PUBLISHED = (
    {"label": "DP-SGD, tanh CNN (Tramèr & Boneh 2021)", "epsilon": 3.0, "delta": 1e-5, "accuracy": 0.981,
     "source": _TB},
    {"label": "DP-SGD, ScatterNet + linear (Tramèr & Boneh 2021)", "epsilon": 3.0, "delta": 1e-5, "accuracy": 0.987,
     "source": _TB},
    {"label": "AdLM (Phan et al. 2017)", "paper": "adlm", "epsilon": 0.25, "accuracy": 0.902, "source": _PHAN,
     "setting": _PHAN_CODE},
    {"label": "ILM (Phan et al. 2017)", "paper": "ilm", "epsilon": 0.25, "accuracy": 0.8846, "source": _PHAN,
     "setting": _PHAN_CODE},
    {"label": "pCDBN (Phan et al. 2017)", "paper": "pcdbn", "epsilon": 0.5, "accuracy": 0.9308,
     "source": "Phan, Wu & Dou, Machine Learning 2017 (corrected), Fig. 5b, 2,400 epochs",
     "setting": "code: 10 pre-training epochs per layer, 2,400 fine-tuning epochs, batch 3,600, 55,000 images"},
    {"label": "AFRRS (Wang et al.)", "paper": "afrrs", "epsilon": 0.6, "accuracy": 0.988,
     "source": "Wang, Xie, Tan, Li & Wang, Table 3",
     "setting": "paper: 60,000 images, 100 epochs, batch not reported (no public code)"},
    {"label": "output perturbation (Lu et al.)", "paper": "output_perturbation", "epsilon": 0.5, "accuracy": None,
     "claim": "no MNIST accuracy transcribed here; its ε is spent per query",
     "source": "Lu, Asghar, Kaafar, Webb & Dickinson, IEEE TIFS 2022 (arXiv 2204.01049)",
     "setting": "paper: 10,000 MNIST training images (its Table 3), a convexified one-hidden-layer MLP"},
    {"label": "input perturbation (Kang et al. 2020)", "paper": "input_perturbation", "epsilon": 0.25,
     "accuracy": None, "claim": "no MNIST experiment: six UCI/Kaggle sets, ε 0.01–0.25, qualitative only",
     "source": "Kang et al., arXiv 2002.08570, §6",
     "setting": "paper: logistic regression on tabular features, T full-batch steps"},
    {"label": "pSGD (DP-SGD of Phan et al. 2017)", "dpsgd_of": ("adlm", "ilm"), "epsilon": 0.25, "accuracy": 0.8209,
     "source": _PHAN},
)
# dpsgd_bandmf and dpsgd_ema (methods.dpsgd_variants): the dpsgd row with BandMF's correlated noise or De et al.'s
# warmed-up weight average, at ε = 1 and 3; their bands and decay (options "bands", "ema_decay") are the stated
# defaults (BANDMF_BANDS, EMA_DECAY) until tools/mnist_tuning.py has chosen them on mnist_validation
MNIST_METHODS = ("nonprivate", "nonprivate_augmented", "dpsgd", "dpsgd_tfprivacy", "dpsgd_scatter", "fm_head_scatter",
                 "outpert_head_scatter", "dpsgd_augmult", "dpsgd_bandmf", "dpsgd_ema")
register_preset(
    "mnist", "the whole MNIST (60,000 private training images, 10,000 test images, no public data): DP-SGD's tanh "
             "CNN on tfdpmech's engine and on tensorflow-privacy, with augmentation multiplicity, BandMF's correlated "
             "noise or a warmed-up weight average, DP-SGD and the noise-once heads on ScatterNet "
             "features; δ = 1e-5; resumes from docs/results/mnist/runs.jsonl",
    {"datasets": ("mnist",), "methods": MNIST_METHODS, "epsilons": (0.25, 0.5, 1.0, 2.0, 3.0), "seeds": (0, 1, 2),
     "model": "tanh_cnn", "public": 0, "delta": 1e-5, "epochs": 40, "batch_size": 512, "audit": ("mia",),
     "out": "docs/results/mnist", "resume": True,
     # DP-SGD recipes per ε: chosen on mnist_validation by tools/mnist_tuning.py (docs/results/mnist/tuning)
     "options": {"nonprivate_epochs": 20, "dpsgd_epochs": {3.0: 40, 2.0: 40, 1.0: 20, 0.5: 20, 0.25: 20},
                 "dpsgd_recipe": {0.25: {"lr_schedule": "cosine"}}, "scatter_epochs": 20,
                 # fm_head_scatter's projection dimension, chosen the same way (512, the default, at ε = 3)
                 "scatter_units": {0.25: 256, 0.5: 256, 1.0: 256, 2.0: 256}},
     # the papers' points in its plot and list; their seed-paper table belongs to mnist-papers, which runs them
     "published": tuple({k: v for k, v in p.items() if k not in ("paper", "dpsgd_of")} for p in MNIST_PUBLISHED),
     # tensorflow-privacy clips this CNN's Conv2D layers per example by its vectorized path only (no ghost norms)
     "subsets": {"dpsgd_tfprivacy": {"epsilons": (1.0, 3.0), "seeds": (0,)},
                 "dpsgd_augmult": {"epsilons": (1.0, 3.0)}, "dpsgd_bandmf": {"epsilons": (1.0, 3.0)},
                 "dpsgd_ema": {"epsilons": (1.0, 3.0)}}},
    {"seeds": (0,), "epsilons": (1.0,), "out": "results", "resume": False,
     "options": {"max_private": 600, "max_test": 400, "dpsgd_epochs": 2, "scatter_epochs": 2, "nonprivate_epochs": 30}})


# The seed papers on the whole MNIST, each at its own ε (AdLM, ILM and Kang et al.'s input perturbation 0.25;
# pCDBN and Lu et al.'s output perturbation 0.5; AFRRS 0.6): the first
# 1,000 training images are public (they train the relevance model and the public_only row), the other 59,000
# private; DP-SGD's tanh CNN at its chosen recipe on the same 59,000 at every one of those ε, and DP-SGD on a
# linear head over the public model's features (the same public data the papers' rows use) and on the whole public
# model from its public weights (clipped 1,024 records at a time: physical_batch_size). The per-record
# modes run at batch 100: their proofs allow at most 135 on this CNN at these budgets (per_record_budget), and
# 100 divides both 59,000 and the quick run's 600 records. The reference modes of AdLM, ILM and AFRRS run at
# batch 1,000 for ``epochs``; pCDBN's as its code does (batch 3,600, 10 pre-training epochs per layer, 2,400
# fine-tuning epochs). The papers' own settings are in the seed-paper table of the report.
PAPER_METHODS = ("nonprivate", "public_only", "adlm_reference", "adlm_per_record", "ilm_reference", "ilm_per_record",
                 "afrrs_reference", "afrrs_per_record", "pcdbn_reference", "pcdbn_private", "outpert_reference",
                 "outpert_head", "ip_reference_head", "ip_private_head", "dpsgd", "dpsgd_head",
                 "dpsgd_finetune")
_AT = {0.25: ("adlm_reference", "adlm_per_record", "ilm_reference", "ilm_per_record", "ip_reference_head",
              "ip_private_head"),
       0.5: ("pcdbn_reference", "pcdbn_private", "outpert_reference", "outpert_head"),
       0.6: ("afrrs_reference", "afrrs_per_record")}
register_preset(
    "mnist-papers", "the seed papers on the whole MNIST at their own ε (AdLM, ILM, input perturbation 0.25; pCDBN, "
                    "output perturbation 0.5; AFRRS 0.6), "
                    "reference and private modes, next to DP-SGD's tanh CNN at the same ε, DP-SGD on the public "
                    "model's features and the public model alone; 1,000 public training images, 59,000 private; "
                    "resumes from "
                    "docs/results/mnist-papers/runs.jsonl",
    {"datasets": ("mnist",), "methods": PAPER_METHODS, "epsilons": (0.25, 0.5, 0.6), "seeds": (0,),
     "model": "tanh_cnn", "public": 1000, "delta": 1e-5, "epochs": 20, "batch_size": 1000, "audit": ("mia",),
     "out": "docs/results/mnist-papers", "resume": True,
     "options": {"gamma": 0.1, "per_record_batch": 100, "per_record_epochs": 2,
                 "pretrain_epochs": 10, "head_epochs": 20, "reference_epochs": 20,
                 # pCDBN's reference fine-tunes on fixed features (about a second an epoch here): the code's 2,400
                 "pcdbn_reference_epochs": 2400,
                 # DP-SGD: the recipes chosen on the validation split at 0.25 and 0.5 (the mnist preset's);
                 # 0.6 takes the one chosen at both 0.5 and 1 (20 epochs, constant step)
                 "nonprivate_epochs": 20, "dpsgd_epochs": 20, "dpsgd_recipe": {0.25: {"lr_schedule": "cosine"}}},
     "published": tuple(p for p in MNIST_PUBLISHED if p["epsilon"] < 1),
     "subsets": {m: {"epsilons": (eps,)} for eps, names in _AT.items() for m in names}},
    {"seeds": (0,), "public": 300, "batch_size": 200, "epochs": 1, "out": "results", "resume": False,
     "options": {"gamma": 0.1, "per_record_batch": 100, "per_record_epochs": 1,
                 "pretrain_epochs": 1, "head_epochs": 2, "reference_epochs": 1, "dpsgd_epochs": 1,
                 "nonprivate_epochs": 30, "max_private": 600, "max_test": 400}})


# AdLM, ILM and AFRRS references at the settings of the authors' MNIST code (methods.adlm_authors): batch 1,800,
# Adam 3e-4, 80,001 steps (--steps N stops earlier), the code's split (the first 5,000 training images validate,
# the other 55,000 train; the 1,000 public images, which train the relevance model, are the first of the 5,000),
# test and validation accuracy every 500 steps. Each run is saved every 500 steps in
# docs/results/mnist-papers-authors/parts/ and continues from there; a larger --steps continues a finished run.
AUTHORS_METHODS = ("adlm_reference_authors", "ilm_reference_authors", "afrrs_reference_authors")
register_preset(
    "mnist-papers-authors", "AdLM, ILM (ε = 0.25) and AFRRS (0.6) in the reference mode at the authors' MNIST code "
                            "settings: batch 1,800, Adam 3e-4, 80,001 steps (--steps N stops earlier), 55,000 "
                            "training / 5,000 validation images, accuracy every 500 steps, resumable at any step; "
                            "claimed, none proven; resumes from docs/results/mnist-papers-authors/",
    {"datasets": ("mnist",), "methods": AUTHORS_METHODS, "epsilons": (0.25, 0.6), "seeds": (0,), "model": "tanh_cnn",
     "public": 1000, "delta": 1e-5, "epochs": 1, "batch_size": 1800, "learning_rate": 3e-4, "audit": (),
     "out": "docs/results/mnist-papers-authors", "resume": True,
     "options": {"gamma": 0.1, "steps": 80_001, "eval_every": 500, "validation_size": 5000},
     "published": tuple(p for p in MNIST_PUBLISHED if p.get("paper") in ("adlm", "ilm", "afrrs")),
     "subsets": {m: {"epsilons": (0.6 if m.startswith("afrrs") else 0.25,)} for m in AUTHORS_METHODS}},
    {"public": 300, "batch_size": 100, "out": "results", "resume": False,
     "options": {"gamma": 0.1, "steps": 40, "eval_every": 20, "validation_size": 500, "max_private": 1200,
                 "max_test": 400}})

# DP-SGD on today's architectures (tfdpmech.experiments.methods.architectures) on the whole MNIST and
# Fashion-MNIST: 60,000 private training images, the 10,000 test images the test set, no public data; each
# model's non-private accuracy beside its DP accuracy at ε = 1 and 3 (δ = 1e-5, Poisson sampling). Finished runs
# are kept in docs/results/architectures/runs.jsonl as they end, so the preset resumes after a kill.
ARCHITECTURE_NAMES = ("tanh_cnn", "vit", "lstm", "conv1d", "groupnorm_cnn")
_TB_TABLE = ("Tramèr & Boneh, ICLR 2021 (arXiv 2011.11660), Table 1, as the authors' repository README "
             "(ftramer/Handcrafted-DP) reproduces it: (ε, δ) = (3, 1e-5)")
ARCHITECTURES_PUBLISHED = (
    {"label": "MNIST: DP-SGD, tanh CNN (Tramèr & Boneh 2021)", "epsilon": 3.0, "delta": 1e-5, "accuracy": 0.981,
     "source": _TB_TABLE},
    {"label": "MNIST: DP-SGD, ScatterNet + linear (Tramèr & Boneh 2021)", "epsilon": 3.0, "delta": 1e-5,
     "accuracy": 0.987, "source": _TB_TABLE},
    {"label": "Fashion-MNIST: DP-SGD, tanh CNN (Tramèr & Boneh 2021)", "epsilon": 3.0, "delta": 1e-5,
     "accuracy": 0.860, "source": _TB_TABLE,
     "setting": "their repository: batch 2,048, SGD 4 with momentum 0.9, C = 0.1, 40 epochs"},
    {"label": "Fashion-MNIST: DP-SGD, ScatterNet + linear (Tramèr & Boneh 2021)", "epsilon": 3.0, "delta": 1e-5,
     "accuracy": 0.897, "source": _TB_TABLE,
     "setting": "their repository: batch 8,192, SGD 16 with momentum 0.9, C = 0.1, per-record group norm"},
)
# the learning rates chosen on the validation split where they differ from the ones stated in advance
# (tools/architectures_tuning.py; docs/results/architectures/tuning/tuning.md)
ARCHITECTURES_CHOSEN = {"lstm": {"learning_rate": 8e-3}, "vit": {"learning_rate": 4e-3}}
register_preset(
    "architectures", "DP-SGD on today's architectures (the tanh CNN, a ViT on 7×7 patches, an LSTM and a Conv1D "
                     "over the rows, a GroupNorm CNN) on the whole MNIST and Fashion-MNIST at ε = 1 and 3, each "
                     "beside the same network without privacy; δ = 1e-5; resumes from "
                     "docs/results/architectures/runs.jsonl",
    {"datasets": ("mnist", "fashion_mnist"),
     "methods": tuple(f"{kind}_{name}" for name in ARCHITECTURE_NAMES for kind in ("nonprivate", "dpsgd")),
     "epsilons": (1.0, 3.0), "seeds": (0,), "public": 0, "delta": 1e-5, "audit": (),
     "out": "docs/results/architectures", "resume": True, "published": ARCHITECTURES_PUBLISHED,
     "options": {"architecture_recipes": ARCHITECTURES_CHOSEN}},
    {"datasets": ("mnist",), "seeds": (0,), "epsilons": (3.0,), "out": "results", "resume": False,
     "options": {"max_private": 600, "max_test": 400, "nonprivate_epochs": 1,
                 "architecture_recipes": {name: {"epochs": 1} for name in ARCHITECTURE_NAMES}}})


# The whole Fashion-MNIST (60,000 private training images, the 10,000 test images the test set, no public data),
# like the mnist preset: the tanh CNN without privacy (with and without the views' augmentation), with DP-SGD, and
# with DP-SGD and augmentation multiplicity (K = 4 views: a 2-pixel random crop), and DP-SGD on
# ScatterNet features, at ε = 1 and 3 over
# three seeds. The DP-SGD recipes are Tramèr & Boneh's published Fashion-MNIST ones, stated before any run (their
# repository: the CNN at batch 2,048, SGD 4 with momentum 0.9; ScatterNet + linear at batch 8,192, SGD 16; C = 0.1,
# 40 epochs: FASHION_PUBLISHED, where tools/fashion_tuning.py starts on the validation split). Finished runs are
# kept in docs/results/fashion-mnist/runs.jsonl as they end, so the preset resumes.
# dpsgd_bandmf and dpsgd_ema: as in the mnist preset, their bands and decay the stated defaults until
# tools/fashion_tuning.py has chosen them on fashion_mnist_validation
FASHION_METHODS = ("nonprivate", "nonprivate_augmented", "dpsgd", "dpsgd_augmult", "dpsgd_scatter", "dpsgd_bandmf",
                   "dpsgd_ema")
FASHION_PUBLISHED = {"dpsgd_epochs": 40, "scatter_epochs": 40,
                     "dpsgd_recipe": {"expected_batch_size": 2048, "learning_rate": 4.0},
                     "scatter_recipe": {"expected_batch_size": 8192, "learning_rate": 16.0}}
# the recipes chosen on the validation split where they differ from the published ones (tools/fashion_tuning.py;
# docs/results/fashion-mnist/tuning: a (method, ε) whose grid has not run in full keeps the published recipe)
FASHION_CHOSEN = {"scatter_epochs": {3.0: 20, 1.0: FASHION_PUBLISHED["scatter_epochs"]},
                  "dpsgd_recipe": {1.0: {"expected_batch_size": 512, "learning_rate": 0.5},
                                   3.0: FASHION_PUBLISHED["dpsgd_recipe"]}}
register_preset(
    "fashion", "the whole Fashion-MNIST (60,000 private training images, 10,000 test images, no public data): the "
               "tanh CNN without privacy (also on augmented views), with DP-SGD, with DP-SGD and augmentation "
               "multiplicity (K = 4), BandMF's correlated noise or a warmed-up weight average, and "
               "DP-SGD on ScatterNet features, at Tramèr & Boneh's published Fashion-MNIST recipes; δ = 1e-5; "
               "resumes from docs/results/fashion-mnist/runs.jsonl",
    {"datasets": ("fashion_mnist",), "methods": FASHION_METHODS, "epsilons": (1.0, 3.0), "seeds": (0, 1, 2),
     "model": "tanh_cnn", "public": 0, "delta": 1e-5, "epochs": 40, "batch_size": 2048, "audit": (),
     "out": "docs/results/fashion-mnist", "resume": True,
     # the views: the 2-pixel crop alone, chosen without privacy on the validation split over crop and flip
     # (tools/fashion_tuning.py; docs/results/fashion-mnist/tuning)
     "options": {"nonprivate_epochs": 20, "augmult_k": 4, "augmentation": "crop",
                 **FASHION_PUBLISHED, **FASHION_CHOSEN},
     "published": tuple(p for p in ARCHITECTURES_PUBLISHED if p["label"].startswith("Fashion"))},
    {"seeds": (0,), "epsilons": (3.0,), "out": "results", "resume": False,
     "options": {"max_private": 600, "max_test": 400, "dpsgd_epochs": 1, "scatter_epochs": 1, "nonprivate_epochs": 1,
                 "augmult_k": 2}})


# DP fine-tuning of a keras.applications backbone (methods.application_finetune): Fashion-MNIST, whose accuracy a
# small public set leaves room to improve (on MNIST 2,000 public images alone come within about a point of the
# private runs' targets); 2,000 training images public, the other 58,000 private, the 10,000 test images the test
# set. MobileNetV2 (width 0.35, GroupNorm with one group: tools/finetune_backbone_groups.py) pretrained on the
# public images without privacy (the public_only row), then DP-SGD on the private images: the head only, the top
# blocks, every layer; and the same network trained from scratch with DP-SGD (dpsgd), all at one recipe stated
# before any run (expected batch 1,024, Adam 1e-3, C = 1, 10 epochs). Finished runs are kept in
# docs/results/finetune/runs.jsonl as they end, so the preset resumes.
# in the order they run: the cheapest (the head alone) first
FINETUNE_METHODS = ("dpsgd_finetune_head", "dpsgd_finetune_top", "dpsgd_finetune_all", "dpsgd")
register_preset(
    "finetune", "DP fine-tuning of Keras's MobileNetV2 (width 0.35, GroupNorm) on Fashion-MNIST: pretrained on "
                "2,000 public training images without privacy, then DP-SGD on the other 58,000 (head only, top "
                "blocks, all layers) beside the public model alone and DP-SGD from scratch; ε = 1 and 3, δ = 1e-5; "
                "resumes from docs/results/finetune/runs.jsonl",
    {"datasets": ("fashion_mnist",), "methods": FINETUNE_METHODS, "epsilons": (1.0, 3.0), "seeds": (0,),
     "model": "mobilenet_v2", "public": 2000, "delta": 1e-5, "epochs": 10, "batch_size": 1024, "learning_rate": 1e-3,
     "audit": (), "out": "docs/results/finetune", "resume": True},
    # quick: one fine-tuning part (the others differ only in set_trainable_part) beside the public model alone
    {"methods": ("dpsgd_finetune_top",), "seeds": (0,), "epsilons": (3.0,), "public": 200, "epochs": 1,
     "batch_size": 100, "out": "results", "resume": False,
     "options": {"max_private": 400, "max_test": 200, "finetune_epochs": 1,
                 "finetune_recipe": {"expected_batch_size": 100, "reference_n": 400}}})


# Privacy per person on the whole MNIST: the 60,000 private training images assigned to 6,000 users with Zipf
# counts (user j holds a share ∝ 1/j; the largest user holds several thousand images, most users a handful).
# Record-level DP-SGD (dpsgd) beside user-level DP-SGD (dpsgd_user: users Poisson-sampled, up to 8 records of a
# sampled user summed and clipped once), ε = 1 and 3; the report states what each record-level ε gives the largest
# user by group privacy. The user-level recipe is the one tools/users_tuning.py chose on mnist_validation at ε = 3
# (docs/results/users/tuning/tuning.json): 1,024 users a step expected, 20 epochs over the users, SGD step 2.
# Resumes from docs/results/users/runs.jsonl.
USERS_RECIPE_POINT = {"expected_users": 1024, "epochs": 20, "learning_rate": 2.0}
register_preset(
    "users", "privacy per person on the whole MNIST: the private images assigned to 6,000 users (Zipf counts); "
             "record-level DP-SGD beside user-level DP-SGD (up to 8 records of a sampled user clipped together) at "
             "ε = 1 and 3, each record-level row with the group-privacy ε of its largest user; δ = 1e-5; resumes "
             "from docs/results/users/runs.jsonl",
    {"datasets": ("mnist",), "methods": ("dpsgd", "dpsgd_user"), "epsilons": (1.0, 3.0), "seeds": (0,),
     "model": "tanh_cnn", "public": 0, "delta": 1e-5, "audit": (), "out": "docs/results/users", "resume": True,
     "options": user_level_options(6000, 8, USERS_RECIPE_POINT)},
    {"epsilons": (3.0,), "out": "results", "resume": False,
     "options": {"users": 60, "records_per_user": 4, "max_private": 600, "max_test": 200, "dpsgd_epochs": 1,
                 "user_epochs": 1}})


# Private fine-tuning of a text model on real text (tfdpmech.experiments.methods.text_finetune): the 8,454 private
# movie-review snippets (positive vs negative; the 2,114 held out are the test set), the other three domains' 12,752
# snippets public: they train the WordPiece vocabulary and a small BERT (2 layers, hidden 128) without privacy.
# Rows: that public model alone, fine-tuned without privacy, and DP-SGD on its head, its LoRA adapters or every
# weight, at ε = 1, 3 and 8 (δ = 1e-5, add/remove one snippet), three seeds. The DP rows train at each part's epochs
# and step chosen on a validation split (text_finetune.TEXT_CHOSEN; the expectations stated before the runs are in
# docs/results.md). Finished runs are kept in docs/results/text/runs.jsonl as they end, so the preset resumes.
TEXT_METHODS = ("nonprivate_text", "dpsgd_text_head", "dpsgd_text_lora", "dpsgd_text_all")
register_preset(
    "text", "private fine-tuning of a small BERT on real text: 8,454 private movie-review snippets (positive vs "
            "negative), the tweets, product and news snippets public (vocabulary and pre-training); the public "
            "model alone, fine-tuned without privacy, and DP-SGD on its head, LoRA adapters or every weight at ε = "
            "1, 3, 8; δ = 1e-5; resumes from docs/results/text/runs.jsonl",
    {"datasets": ("sentiment_snippets",), "methods": TEXT_METHODS, "epsilons": (1.0, 3.0, 8.0), "seeds": (0, 1, 2),
     "model": "bert_tiny", "public": "other_domains", "delta": 1e-5, "audit": (), "out": "docs/results/text",
     "resume": True},
    # quick: one DP row (the others differ only in set_text_trainable_part) beside the public model alone
    {"methods": ("dpsgd_text_lora",), "seeds": (0,), "epsilons": (3.0,), "out": "results", "resume": False,
     "options": {"max_private": 256, "max_test": 128, "max_public": 512, "sequence_length": 160, "text_epochs": 1,
                 "text_recipe": {"expected_batch_size": 64, "reference_n": 256}}})
