"""The two strategies of spgemm: end-to-end tests run through both."""

from __future__ import annotations

import numpy as np
import pytest

from bmsparse.spgemm import rowmerge


@pytest.fixture(params=["merge", "tasks"])
def spgemm_path(request, monkeypatch):
    """"merge": products the row merge can take take it (``rowmerge.chooses``);
    "tasks": every product builds a task list. The host always does the latter."""
    if request.param == "tasks":
        monkeypatch.setattr(rowmerge, "MAX_ROW_BLOCKS", -1)
    elif "xp" not in request.fixturenames or request.getfixturevalue("xp") is np:
        pytest.skip("the row merge runs on the GPU only")
    return request.param
