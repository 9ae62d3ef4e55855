"""Semirings of the product ``C = A ⊕.⊗ B``, named as in GraphBLAS.

An output entry is ``C[i, k] = ⊕ over j of A[i, j] ⊗ B[j, k]`` where the
sum runs over the j that A row i and B column k both hold. An entry exists
when at least one such j does: the structure of C is the Boolean product of
the structures whatever the semiring, so a missing entry is the semiring's
zero and no identity (an infinity for ``min_plus``) is ever stored.

Each constant names its C++ functor in ``_cuda/semiring.cuh``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

_NUMERIC = tuple(np.dtype(t) for t in ("int32", "int64", "float32", "float64"))
_ALL = tuple(np.dtype(t) for t in ("int32", "int64", "float32", "float64", "complex64",
                                   "complex128"))
_COUNTS = tuple(np.dtype(t) for t in ("int32", "int64"))


def times(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a * b`` element-wise (NumPy arrays, broadcast) as the kernels and
    scipy compute it: a complex product is ``(ar br - ai bi) + (ar bi + ai
    br) j``, each product rounded before its sum.

    NumPy's complex loops fuse multiply-adds on hosts that have them (SIMD),
    which moves the last bit of about half the products: the host twins
    would then differ from scipy and from the kernels (compiled without
    fused multiply-adds).
    """
    if a.dtype.kind != "c" and b.dtype.kind != "c":
        return a * b
    out = np.empty(np.broadcast_shapes(a.shape, b.shape), dtype=np.result_type(a, b))
    ar, ai, br, bi = a.real, a.imag, b.real, b.imag
    out.real = ar * br - ai * bi
    out.imag = ar * bi + ai * br
    return out


@dataclass(frozen=True)
class Semiring:
    """An additive monoid and a multiplicative operator.

    Attributes
    ----------
    name : str
        ``<monoid>_<binaryop>``.
    monoid : {"plus", "min", "max", "lor", "any"}
    binaryop : {"times", "plus", "land", "pair"}
    functor : str or None
        The C++ struct of ``_cuda/semiring.cuh``; None for the structural
        semirings, which never compute a value.
    dtypes : tuple of dtype
        Value dtypes of the result it supports (empty: a bool pattern result).
    """

    name: str
    monoid: str
    binaryop: str
    functor: str | None
    dtypes: tuple[np.dtype, ...]

    @property
    def structural(self) -> bool:
        """True when C is a pattern (bool) matrix computed from bitmaps alone."""
        return self.functor is None

    @property
    def reads_values(self) -> bool:
        """False for ``pair`` products, which count and ignore A's and B's values."""
        return self.binaryop not in ("pair", "land")

    def identity(self, dtype: Any) -> Any:
        """The monoid's identity in ``dtype``: where an accumulator starts
        (for ``any``, where every value is one, zero)."""
        dt = np.dtype(dtype)
        if self.monoid in ("plus", "lor", "any"):
            return dt.type(0)
        if dt.kind == "b":
            return dt.type(self.monoid == "min")
        if dt.kind == "i":
            limits = np.iinfo(dt)
            return dt.type(limits.max if self.monoid == "min" else limits.min)
        return dt.type(np.inf if self.monoid == "min" else -np.inf)

    def __repr__(self) -> str:
        return f"bmsparse.semiring.{self.name}"


#: the arithmetic product: ``C[i, k] = sum_j A[i, j] * B[j, k]``
plus_times = Semiring("plus_times", "plus", "times", "PlusTimes", _ALL)
#: shortest paths: ``C[i, k] = min_j A[i, j] + B[j, k]``
min_plus = Semiring("min_plus", "min", "plus", "MinPlus", _NUMERIC)
#: longest paths: ``C[i, k] = max_j A[i, j] + B[j, k]``
max_plus = Semiring("max_plus", "max", "plus", "MaxPlus", _NUMERIC)
#: most reliable paths: ``C[i, k] = max_j A[i, j] * B[j, k]``
max_times = Semiring("max_times", "max", "times", "MaxTimes", _NUMERIC)
#: counts: ``C[i, k]`` = the number of j with A[i, j] and B[j, k] both present
plus_pair = Semiring("plus_pair", "plus", "pair", "PlusPair", _COUNTS)
#: reachability: ``C[i, k]`` present when some j has A[i, j] and B[j, k]
lor_land = Semiring("lor_land", "lor", "land", None, ())
#: the same structure as ``lor_land`` (GraphBLAS's ANY monoid, PAIR operator)
any_pair = Semiring("any_pair", "any", "pair", None, ())

#: every semiring by name, with the common alias ``or_and``
SEMIRINGS: dict[str, Semiring] = {
    s.name: s for s in (plus_times, min_plus, max_plus, max_times, plus_pair, lor_land,
                        any_pair)
}
SEMIRINGS["or_and"] = lor_land


def get_semiring(semiring: str | Semiring) -> Semiring:
    """The Semiring constant for a name or a constant.

    Raises
    ------
    ValueError
        Unknown name, or a Semiring equal to none of the constants (the
        message lists the known ones).
    TypeError
        Neither a string nor a Semiring.
    """
    if isinstance(semiring, Semiring):
        # the constant itself for an equal copy (a pickle, a deepcopy): the
        # product tells some constants apart by identity
        known = SEMIRINGS.get(semiring.name)
        if known == semiring:
            return known
        # any other has no functor in _cuda/semiring.cuh (and perhaps a monoid
        # the host has no reduction for): refused here, not deep in a stage
        raise ValueError(f"unknown semiring {semiring.name!r} (a Semiring that is none of "
                         f"bmsparse.semiring's constants); known: {', '.join(SEMIRINGS)}")
    if not isinstance(semiring, str):
        raise TypeError(f"semiring must be a name or a bmsparse.semiring constant, got "
                        f"{type(semiring).__name__}")
    try:
        return SEMIRINGS[semiring]
    except KeyError:
        raise ValueError(f"unknown semiring {semiring!r}; known: "
                         f"{', '.join(SEMIRINGS)}") from None


__all__ = ["SEMIRINGS", "Semiring", "any_pair", "get_semiring", "lor_land", "max_plus",
           "max_times", "min_plus", "plus_pair", "plus_times"]
