"""The noise of a DP-SGD step: independent (DP-SGD) or correlated across steps by a banded strategy (BandMF)."""
