"""Checks and error messages shared by the whole package.

Every message starts lower-case, has no final period, names the argument,
states the rule and shows what it got, so the same fault reads the same
everywhere.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

#: value dtypes a BitmapMatrix can hold, in promotion order
SUPPORTED_DTYPES: tuple[np.dtype, ...] = tuple(
    np.dtype(t) for t in ("bool", "int32", "int64", "float32", "float64",
                          "complex64", "complex128"))

#: index arrays switch from int32 to int64 above this value; tests lower it
INT32_LIMIT = np.iinfo(np.int32).max


def get_index_dtype(maxval: int) -> np.dtype:
    """int32 when every index fits below ``INT32_LIMIT``, else int64."""
    return np.dtype(np.int32) if maxval <= INT32_LIMIT else np.dtype(np.int64)


#: value dtypes cupyx.scipy.sparse can hold
CUPYX_DTYPES: tuple[np.dtype, ...] = tuple(
    np.dtype(t) for t in ("bool", "float32", "float64", "complex64", "complex128"))


def check_cupyx_dtype(dtype: np.dtype, instead: str) -> None:
    """TypeError, suggesting ``instead``, for a dtype cupyx.scipy.sparse cannot hold."""
    if dtype not in CUPYX_DTYPES:
        raise TypeError(f"cupyx.scipy.sparse does not support dtype {dtype.name}; "
                        f"use {instead} first")


def csr_from_arrays(xp: Any, indptr: Any, indices: Any, data: Any,
                    shape: tuple[int, int]) -> Any:
    """scipy ``csr_array`` (``xp`` NumPy) or cupyx ``csr_matrix`` over the
    given arrays, whose column indices are sorted and distinct within rows
    (canonical: cupyx is told so, and never checks)."""
    if xp is np:
        import scipy.sparse as sp

        out = sp.csr_array((data, indices, indptr), shape=shape)
    else:
        import cupyx.scipy.sparse as csp

        # cupyx's constructor reads indptr's ends back (a small launch and a
        # sync); its internal _from_parts checks the same arrays on the host
        # only. Where it is missing or refuses them, the public one
        from_parts = getattr(csp.csr_matrix, "_from_parts", None)
        if from_parts is not None and indices.dtype == indptr.dtype:
            try:
                return from_parts(data, indices, indptr, shape, has_canonical_format=True)
            except (TypeError, ValueError):
                pass
        out = csp.csr_matrix((data, indices, indptr), shape=shape)
    out.has_sorted_indices = True
    return out


def supported_names() -> str:
    return ", ".join(d.name for d in SUPPORTED_DTYPES)


def check_dtype(dtype: Any, what: str = "dtype") -> np.dtype:
    """Return ``dtype`` as a NumPy dtype, or raise TypeError if unsupported."""
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"{what} {dtype!r} is not a dtype; supported: "
                        f"{supported_names()}") from exc
    if dt not in SUPPORTED_DTYPES:
        if dt.newbyteorder("=") in SUPPORTED_DTYPES:
            # (its name is the native one's: "float64 is not supported" would
            # contradict the list)
            raise TypeError(f"{what} {dt.str} is in non-native byte order; convert it with "
                            f".astype(numpy.{dt.name})")
        raise TypeError(f"{what} {dt.name} is not supported; supported: "
                        f"{supported_names()}")
    return dt


def upcast(*dtypes: Any) -> np.dtype:
    """NumPy's promotion of ``dtypes`` (dtypes, arrays or scalars), checked
    against the supported ones; TypeError for a scalar NumPy has no dtype for
    (a ``Fraction``, a ``Decimal``)."""
    try:
        dtype = np.result_type(*dtypes)
    except TypeError:
        bad = next((d for d in dtypes if not _has_dtype(d)), dtypes)
        raise TypeError(f"{type(bad).__name__} {bad!r} has no NumPy dtype; use a Python or "
                        "NumPy int, float or complex (e.g. float(x))") from None
    return check_dtype(dtype, "result dtype")


def _has_dtype(x: Any) -> bool:
    """True when NumPy finds a dtype for ``x`` (a dtype, an array or a scalar)."""
    try:
        np.result_type(x)
    except TypeError:
        return False
    return True


def check_shape(shape: Any) -> tuple[int, int]:
    """Return ``shape`` as a pair of non-negative Python ints."""
    from ._format import MAX_DIM

    try:
        m, n = (int(operator_index(s)) for s in shape)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"shape must be a pair of integers, got {shape!r}") from exc
    if m < 0 or n < 0:
        raise ValueError(f"shape must be non-negative, got {(m, n)}")
    if m > MAX_DIM or n > MAX_DIM:
        raise ValueError(f"shape must be at most {MAX_DIM} along each axis "
                         f"(block indices are 32-bit), got {(m, n)}")
    return m, n


def operator_index(x: Any, name: str = "value") -> int:
    """``x`` as a Python int, as ``operator.index`` takes it (Python and NumPy
    integers; floats never); TypeError naming ``name`` otherwise."""
    import operator

    try:
        return operator.index(x)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(x).__name__}") from None


def check_max_memory(max_memory: Any) -> int | None:
    """``max_memory`` (None, or a positive number of bytes) as an int or None."""
    if max_memory is None:
        return None
    if isinstance(max_memory, (bool, np.bool_)) or not isinstance(max_memory, numbers.Real):
        raise TypeError(f"max_memory must be a number of bytes, got {type(max_memory).__name__}")
    if not max_memory >= 1:  # (NaN too)
        raise ValueError(f"max_memory must be at least 1 byte, got {max_memory}")
    return int(min(max_memory, 2**62))


def matmul_mismatch(a_shape: tuple[int, int], b_shape: tuple[int, ...],
                    written: tuple[tuple[int, ...], tuple[int, ...]] | None = None) -> ValueError:
    """scipy's wording for a dimension mismatch in ``a @ b`` (``b`` a matrix or a
    vector); ``written``: the operands' shapes to name, where the product the
    user wrote was computed as ``a @ b`` (``x @ m`` as ``m.T @ x.T``)."""
    m = "1?" if len(b_shape) == 1 else "m"
    shown = written or (a_shape, b_shape)
    return ValueError(
        f"matmul: dimension mismatch with signature (n,k={a_shape[1]}),"
        f"(k={b_shape[0]},{m})->(n,{m}) (got shapes {shown[0]} and {shown[1]})")


def get_array_module(*arrays: Any) -> Any:
    """numpy or cupy, whichever all non-None ``arrays`` belong to.

    Raises TypeError for a mix: no copy between host and device happens
    silently; ValueError for CuPy arrays on another GPU than the current
    one (:func:`check_device`).
    """
    # every stage asks, mostly of CuPy arrays alone: one type check each
    if arrays and _CUPY is not None and type(arrays[0]) is _CUPY[0]:
        kind, device = _CUPY[0], _CUPY[2]()
        for a in arrays:
            if type(a) is kind:
                if a.data.device_id != device:
                    check_device(a)  # (raises)
            elif a is not None:
                break
        else:
            return _CUPY[1]
    module = None
    for a in arrays:
        if a is None:
            continue
        mod = _module_of(a)
        if module is None:
            module = mod
        elif mod is not module:
            raise TypeError("operands must all be on the host (NumPy) or all on the "
                            "device (CuPy), got a mix; move one with .get() or "
                            ".to_device()")
    if module is None or module is np:
        return np
    check_device(*arrays)
    return module


def check_device(*arrays: Any) -> None:
    """ValueError unless every CuPy array of ``arrays`` (None skipped) is on
    the current GPU: a kernel launched there reading another GPU's memory
    faults, and the fault ends the process's use of every GPU."""
    if _CUPY is None:
        import cupy

        device = cupy.cuda.runtime.getDevice()
    else:
        device = _CUPY[2]()
    for a in arrays:
        if a is not None and a.data.device_id != device:
            raise ValueError(f"an operand is on GPU {a.data.device_id} but the current device "
                             f"is GPU {device}: run under cupy.cuda.Device("
                             f"{a.data.device_id}), or copy the operand with .to_device() "
                             "(a matrix) or cupy.array (an array) under the current one")


#: CuPy's ndarray type and module, and cupy.cuda.runtime.getDevice, once a
#: CuPy array has been seen (every stage asks for the module of its arrays:
#: the common case is one type check)
_CUPY: tuple[type, Any, Any] | None = None


def _module_of(a: Any) -> Any:
    global _CUPY
    kind = type(a)
    if kind is np.ndarray:
        return np
    if _CUPY is not None and kind is _CUPY[0]:
        return _CUPY[1]
    if isinstance(a, np.ndarray):
        return np
    if kind.__module__.startswith("cupy"):
        import cupy

        if kind is cupy.ndarray:
            _CUPY = (cupy.ndarray, cupy, cupy.cuda.runtime.getDevice)
        return cupy
    raise TypeError(f"expected a NumPy or CuPy array, got {kind.__name__}")


#: True once a call has found CuPy and a GPU (:func:`gpu_module`)
_GPU_FOUND = False


def gpu_module(what: str) -> Any:
    """The cupy module, for ``what`` (an operation that moves data to the
    GPU); RuntimeError saying what is missing where CuPy is not installed or
    sees no GPU (CuPy's own error there speaks of the driver's version)."""
    global _GPU_FOUND
    try:
        import cupy
    except ImportError as exc:
        raise RuntimeError(f"{what} needs CuPy: install bmsparse with the extra of the "
                           "machine's CUDA version, bmsparse[cuda12] or bmsparse[cuda13]") from exc
    if not _GPU_FOUND:
        try:
            found = cupy.cuda.runtime.getDeviceCount() > 0
        except Exception as exc:  # noqa: BLE001 - any failure means no usable GPU
            raise RuntimeError(f"{what} needs a CUDA GPU, and CuPy can use none here ({exc}); "
                               "keep the matrix on the host (NumPy)") from exc
        if not found:
            raise RuntimeError(f"{what} needs a CUDA GPU, and CuPy finds none; keep the "
                               "matrix on the host (NumPy)")
        _GPU_FOUND = True
    return cupy


def cupy_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device (:func:`gpu_module`)."""
    try:
        gpu_module("")
    except Exception:  # noqa: BLE001 - any failure means "no usable device"
        return False
    return True
