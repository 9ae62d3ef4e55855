"""The strategies of spgemm: end-to-end tests run through each."""

from __future__ import annotations

import numpy as np
import pytest

from bmsparse.spgemm import lean, rowdense, rowmerge, rowscalar


@pytest.fixture(params=["lean", "scalar", "dense", "merge", "tasks"])
def spgemm_path(request, monkeypatch):
    """"lean": small products the dense path takes run in one launch
    (``lean.chooses``); "scalar": that off, products whose B has few block
    columns go by B's scalar rows, whatever their entries per block
    (``rowscalar.chooses``); "dense": those off, such products take dense
    accumulators (``rowdense.chooses``); "merge": those off, products the
    row merge can take take it (``rowmerge.chooses``); "tasks": every
    product builds a task list. The host always does the latter."""
    monkeypatch.setattr(rowscalar, "MAX_ENTRIES_PER_BLOCK",
                        float("inf") if request.param == "scalar" else -1)
    monkeypatch.setattr(rowscalar, "MIN_TERMS_PER_COLUMN", 0)
    if request.param != "lean":
        monkeypatch.setattr(lean, "MAX_BLOCKS", -1)
    if request.param not in ("lean", "scalar", "dense"):
        monkeypatch.setattr(rowdense, "MAX_COLUMNS", -1)
    if request.param == "tasks":
        monkeypatch.setattr(rowmerge, "MAX_ROW_BLOCKS", -1)
    elif "xp" not in request.fixturenames or request.getfixturevalue("xp") is np:
        pytest.skip(f"the {request.param} path runs on the GPU only")
    return request.param
