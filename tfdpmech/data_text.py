"""Real text for the text preset: Hutto & Gilbert's human-rated sentiment snippets, read offline.

``load_sentiment_snippets()`` reads the four gzip files of ``sentiment_snippets/`` (each line
``id<TAB>mean rating<TAB>text``; the rating is the mean of about 20 raters on −4 … +4) from ``data_dir=`` or
``$TFDPMECH_DATA_DIR/sentiment_snippets/`` and checks each file's md5 against the one its source states:

* **private**: the 10,605 movie-review snippets (Rotten Tomatoes sentences, Pang & Lee 2005), labelled positive
  (rating > 0) or negative (rating < 0). The 37 rated exactly 0 have no polarity and are left out of the task
  (train and test alike), so 10,568 remain: a fixed stratified split (seed 0) keeps 2,114 for the test set and
  8,454 private training records. ``validation=True`` (the dataset ``sentiment_snippets_validation``) splits
  those 8,454 again, stratified with seed 1: 7,454 train and 1,000 score in place of the test set, which it
  never reads (the recipes are chosen there).
* **public**: the tweets, product-review and news-editorial snippets (13,098), labelled the same way, the 346
  rated 0 left out: 12,752 texts of other domains. They train the vocabulary and the public model; no private
  text does (a vocabulary learnt from private text would reveal its words).

The snippets are SST-2-like but are not SST-2: accuracies on them are not comparable with SST-2 results.
This module does not import TensorFlow.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import os
from pathlib import Path

import numpy as np

from .data import DATA_DIR_ENV, _stratified_split
from .noise import make_rng

__all__ = ["TextSplits", "load_sentiment_snippets", "SNIPPET_FILES", "PRIVATE_DOMAIN", "PUBLIC_DOMAINS",
           "TEXT_DATASETS"]

TEXT_DATASETS = ("sentiment_snippets", "sentiment_snippets_validation")
PRIVATE_DOMAIN = "movieReviewSnippets"
PUBLIC_DOMAINS = ("tweets", "amazonReviewSnippets", "nytEditorialSnippets")
# file -> md5 of its decompressed text, as ../shared/datasets/README.md states them
SNIPPET_FILES = {
    "movieReviewSnippets": "0f3af01bfd9659ccaff4195eb171511f",
    "tweets": "1225f43ee55e6ee8a8e6e6860b80b311",
    "amazonReviewSnippets": "061c8acd32e012312ed077a3b11dbeb6",
    "nytEditorialSnippets": "4c9354d022364c43092f8c658b41684f",
}
TEST_SIZE = 2114  # 20 % of the 10,568 movie snippets with a polarity
SPLIT_SEED = 0
VALIDATION_SIZE, VALIDATION_SEED = 1000, 1  # sentiment_snippets_validation: scored in place of the test set
CREDIT = ("C.J. Hutto and E. Gilbert, \"VADER: A Parsimonious Rule-based Model for Sentiment Analysis of Social "
          "Media Text\", ICWSM 2014 (ground-truth sets of the MIT-licensed vaderSentiment 3.3.2 sdist); the movie "
          "snippets come from Rotten Tomatoes via Pang & Lee (2005)")


@dataclasses.dataclass(frozen=True, eq=False)
class TextSplits:
    """Texts and integer labels (0 negative, 1 positive) of the private training, test and public sets."""

    train_texts: list
    train_labels: np.ndarray
    test_texts: list
    test_labels: np.ndarray
    public_texts: list
    public_labels: np.ndarray
    source: str
    public_source: str
    num_classes: int = 2


def _folder(data_dir) -> Path:
    if data_dir is not None:
        roots = [Path(data_dir)]
    elif os.environ.get(DATA_DIR_ENV):
        roots = [Path(os.environ[DATA_DIR_ENV])]
    else:
        roots = []
    for root in roots:
        for folder in (root / "sentiment_snippets", root):
            if all((folder / f"{name}_GroundTruth.txt.gz").is_file() for name in SNIPPET_FILES):
                return folder
    tried = ", ".join(str(r) for r in roots) or f"no data_dir and no ${DATA_DIR_ENV}"
    raise ValueError(f"sentiment_snippets: the four *_GroundTruth.txt.gz files were not found ({tried}); pass "
                     f"data_dir= or set ${DATA_DIR_ENV} to the folder holding sentiment_snippets/ (the files are in "
                     "the sdist of vaderSentiment 3.3.2: pip download --no-deps --no-binary :all: "
                     "vaderSentiment==3.3.2, additional_resources/hutto_ICWSM_2014.tar.gz)")


def _read(folder: Path, name: str) -> tuple[np.ndarray, list]:
    raw = gzip.decompress((folder / f"{name}_GroundTruth.txt.gz").read_bytes())
    digest = hashlib.md5(raw).hexdigest()
    if digest != SNIPPET_FILES[name]:
        raise ValueError(f"{name}_GroundTruth.txt.gz decompresses to md5 {digest}, not {SNIPPET_FILES[name]}: the "
                         "file is not the published one; fetch it again from the vaderSentiment 3.3.2 sdist")
    ratings, texts = [], []
    for line in raw.decode("utf-8").splitlines():
        if line.strip():
            _, rating, text = line.split("\t", 2)
            ratings.append(float(rating))
            texts.append(text.strip())
    return np.asarray(ratings), texts


def _polar(ratings, texts):
    keep = ratings != 0.0  # no polarity: neither class
    return [t for t, k in zip(texts, keep) if k], (ratings[keep] > 0).astype(np.int64), int((~keep).sum())


def load_sentiment_snippets(data_dir=None, *, validation: bool = False) -> TextSplits:
    """The private movie snippets (train and test) and the public snippets of the other three domains.

    ``validation=True``: the private training snippets split again (:data:`VALIDATION_SIZE` stratified with
    :data:`VALIDATION_SEED`), the held-out ones in place of the test set; the test snippets are not returned.

    Raises:
        ValueError: the files are missing (the message says where they were looked for and where to get them),
            or one of them is not the published file (its md5 differs).
    """
    folder = _folder(data_dir)
    texts, labels, neutral = _polar(*_read(folder, PRIVATE_DOMAIN))
    train, test = _stratified_split(labels, TEST_SIZE, make_rng(SPLIT_SEED))
    if validation:
        kept, held = _stratified_split(labels[train], VALIDATION_SIZE, make_rng(VALIDATION_SEED))
        train, test = train[kept], train[held]
    public_texts, public_labels, public_neutral = [], [], 0
    for name in PUBLIC_DOMAINS:
        t, y, k = _polar(*_read(folder, name))
        public_texts += t
        public_labels.append(y)
        public_neutral += k
    split = (f"split {len(texts) - TEST_SIZE}/{TEST_SIZE} stratified with seed {SPLIT_SEED}, "
             f"its training part split again {len(train)}/{len(test)} with seed {VALIDATION_SEED} (validation: "
             "the test set unread)" if validation else
             f"split {len(train)}/{len(test)} stratified with seed {SPLIT_SEED}")
    source = (f"{PRIVATE_DOMAIN} ({len(texts)} snippets with a polarity; {neutral} rated 0 left out) {split}; "
              + CREDIT)
    public_source = (f"{len(public_texts)} snippets of {', '.join(PUBLIC_DOMAINS)} ({public_neutral} rated 0 left "
                     "out): other domains than the private set")
    return TextSplits([texts[i] for i in train], labels[train], [texts[i] for i in test], labels[test],
                      public_texts, np.concatenate(public_labels), source, public_source)
