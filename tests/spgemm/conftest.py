"""The strategies of spgemm: end-to-end tests run through each."""

from __future__ import annotations

import numpy as np
import pytest

from bmsparse.spgemm import lean, rowdense, rowmerge


@pytest.fixture(params=["lean", "dense", "merge", "tasks"])
def spgemm_path(request, monkeypatch):
    """"lean": small products the dense path takes run in one launch
    (``lean.chooses``); "dense": that off, products whose B has few block
    columns take dense accumulators (``rowdense.chooses``); "merge": those
    off, products the row merge can take take it (``rowmerge.chooses``);
    "tasks": every product builds a task list. The host always does the
    latter."""
    if request.param != "lean":
        monkeypatch.setattr(lean, "MAX_BLOCKS", -1)
    if request.param not in ("lean", "dense"):
        monkeypatch.setattr(rowdense, "MAX_COLUMNS", -1)
    if request.param == "tasks":
        monkeypatch.setattr(rowmerge, "MAX_ROW_BLOCKS", -1)
    elif "xp" not in request.fixturenames or request.getfixturevalue("xp") is np:
        pytest.skip(f"the {request.param} path runs on the GPU only")
    return request.param
