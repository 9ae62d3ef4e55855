"""The three strategies of spgemm: end-to-end tests run through each."""

from __future__ import annotations

import numpy as np
import pytest

from bmsparse.spgemm import rowdense, rowmerge


@pytest.fixture(params=["dense", "merge", "tasks"])
def spgemm_path(request, monkeypatch):
    """"dense": products whose B has few block columns take dense accumulators
    (``rowdense.chooses``); "merge": those off, products the row merge can
    take take it (``rowmerge.chooses``); "tasks": every product builds a task
    list. The host always does the latter."""
    if request.param != "dense":
        monkeypatch.setattr(rowdense, "MAX_COLUMNS", -1)
    if request.param == "tasks":
        monkeypatch.setattr(rowmerge, "MAX_ROW_BLOCKS", -1)
    elif "xp" not in request.fixturenames or request.getfixturevalue("xp") is np:
        pytest.skip(f"the {request.param} path runs on the GPU only")
    return request.param
