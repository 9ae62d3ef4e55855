"""The kernel loader: sources, registration, launches."""

from __future__ import annotations

import numpy as np
import pytest

from bmsparse import _kernels


def test_source_inlines_package_headers_once():
    text = _kernels.source("spgemm/count.cu")
    assert '#include "' not in text
    assert text.count("__device__ __forceinline__ u64 bool_product(u64 a, u64 b)") == 1


@pytest.mark.parametrize("params,want", [
    ((), "bmsparse_count_bitmaps"),
    (("T",), "bmsparse_count_bitmaps<double>"),
    (("T", "I"), "bmsparse_count_bitmaps<bm_complex<float>, int>"),
])
def test_name_expression(params, want):
    types = {"T": np.float64 if len(params) == 1 else np.complex64, "I": np.int32}
    assert _kernels.name_expression("bmsparse_count_bitmaps", params, **types) == want


@pytest.mark.gpu
def test_launch_refuses_strided_arrays():
    import cupy

    kernel = _kernels.get_kernel("spgemm/compact.cu", "bmsparse_compact_values",
                                 T=np.float64)
    strided = cupy.zeros(8, dtype=cupy.uint64)[::2]
    with pytest.raises(ValueError, match="bmsparse_compact_values.*must be C-contiguous"):
        _kernels.launch(kernel, 4, (strided, strided, strided, strided, strided, 4, strided))
