"""The built-in methods of ``tfdpmech compare``, one module per family (baselines, DP-SGD, each paper, the
functional head); each module registers its methods when imported."""

from . import (  # noqa: F401
    adlm, adlm_authors, application_finetune, architectures, baselines, dpsgd, dpsgd_variants, functional_head,
    input_perturbation, output_perturbation, pcdbn, text_finetune, user_level,
)
