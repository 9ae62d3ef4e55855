"""bmsparse: bitmap-based sparse matrix multiplication (SpGEMM) on GPUs.

A matrix is cut into 8x8 blocks; each non-empty block is a 64-bit key, a
64-bit bitmap of its non-zeros and its values. ``A @ B`` runs in four
stages: task list, count, multiply, compact (Zhang & Gruenwald, bmSPARSE).
"""

from __future__ import annotations

from ._format import BLOCK
from ._matrix import BitmapMatrix
from ._select import tril, triu
from ._sputils import SUPPORTED_DTYPES
from . import graph, semiring, testing
from .construct import block_diag, bmat, diags, eye, hstack, identity, kron, vstack
from .io import load_npz, mmread, mmwrite, read_matrix, save_npz
from .semiring import Semiring
from .spgemm import STAGES, masked_pair_sum, plan_slices, spgemm
from .spmv import spmv

__version__ = "0.1.0"

__all__ = ["BLOCK", "BitmapMatrix", "STAGES", "SUPPORTED_DTYPES", "Semiring", "block_diag",
           "bmat", "diags", "eye", "graph", "hstack", "identity", "kron", "load_npz",
           "masked_pair_sum", "mmread", "mmwrite", "plan_slices", "read_matrix", "save_npz",
           "semiring", "spgemm", "spmv", "testing", "tril", "triu", "vstack"]
