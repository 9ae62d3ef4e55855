"""BitmapMatrix: a sparse matrix stored as 8x8 bitmap blocks (bmSPARSE)."""

from __future__ import annotations

import numbers
from typing import Any, NoReturn

import numpy as np

from . import _derived, _extremes, _kernels, _readback, convert
from . import transpose as _transpose
from ._format import BLOCK, nblocks_along, popcount
from ._primitives import exclusive_scan
from ._sputils import (SUPPORTED_DTYPES, check_cupyx_dtype, check_dtype, check_shape,
                       csr_from_arrays, get_array_module, gpu_module, operator_index, upcast)
from ._ufuncs import ElementwiseFunctions
from .spmv import kept_product


class _BlockArray:
    """One of a BitmapMatrix's block arrays: reading or replacing it first
    computes a lazy transpose (``BitmapMatrix._arrays``)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._attr = "_" + name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        # read on every operation (about 18 times per small product): the
        # common case, no transpose pending or being made, is two checks and a
        # dict read
        if obj._transpose_of is not None or obj._made is not None:
            obj._arrays()
        return obj.__dict__[self._attr]

    def __set__(self, obj: Any, value: Any) -> None:
        obj._arrays()
        obj._store(self._attr, _replacement(obj, self._attr[1:], value))

    def __delete__(self, obj: Any) -> None:
        # (without this, Python's message is a bare "__delete__")
        name = self._attr[1:]
        hint = "; assign None to make the matrix a pattern" if name == "values" else ""
        raise AttributeError(f"cannot delete {name}: a BitmapMatrix always has its block "
                             f"arrays; assign a new array instead{hint}")


#: the stored entries ``str(A)`` shows at most, as scipy.sparse's
#: ``maxprint``: past it, the first and last half
MAXPRINT = 50

_ARRAY_DTYPES = {"keys": np.dtype(np.uint64), "bitmaps": np.dtype(np.uint64),
                 "offsets": np.dtype(np.int64)}


def _dtype_named(arr: Any, want: np.dtype) -> str:
    """``arr``'s dtype as an error names it beside ``want``: a non-native byte
    order has the native dtype's name, and "must be uint64, got uint64"
    would name no difference."""
    if arr.dtype != want and arr.dtype.newbyteorder("=") == want:
        return f"{arr.dtype.str} (non-native byte order)"
    return arr.dtype.name


def _block_array_problem(name: str, arr: Any) -> str | None:
    """What is wrong with ``arr`` as block array ``name`` (keys, bitmaps or
    offsets) on its own: its dtype or rank; None when nothing is."""
    want = _ARRAY_DTYPES[name]
    got = _dtype_named(arr, want)
    if name == "offsets":
        if arr.dtype != want or arr.ndim != 1:
            return f"offsets must be a 1-D int64 array, got {arr.ndim}-D {got}"
    elif arr.dtype != want:
        return f"{name} must be {want.name}, got {got}"
    elif arr.ndim != 1:
        return f"{name} must be 1-D, got {arr.ndim}-D"
    return None


def _replacement(m: BitmapMatrix, name: str, value: Any) -> Any:
    """``value`` checked as a new ``m.<name>``, as far as it can be alone.

    The structure's arrays may be replaced one after another, so only their
    dtype and rank are checked here (:meth:`BitmapMatrix.check_format`
    checks the whole). New values must fill the structure's entries: one
    read of ``offsets[-1]`` (a sync on the GPU). All-True bool values make
    the matrix a pattern, which stores no False.
    """
    if value is None:
        if name != "values":
            raise TypeError(f"{name} cannot be None")
        return None  # a pattern
    xp = get_array_module(m.__dict__["_keys"])
    if isinstance(value, (list, tuple)):
        value = xp.asarray(value)
    if not hasattr(value, "ndim") or not hasattr(value, "dtype"):
        raise TypeError(f"{name} must be an array, got {type(value).__name__}")
    get_array_module(m.__dict__["_keys"], value)  # host and device do not mix
    if name != "values":
        problem = _block_array_problem(name, value)
        if problem is not None:
            raise (TypeError if value.dtype != _ARRAY_DTYPES[name] else ValueError)(problem)
        return value
    if value.ndim != 1:
        raise ValueError(f"values must be 1-D, got {value.ndim}-D")
    check_dtype(value.dtype, "values dtype")
    offsets = m.__dict__["_offsets"]
    if offsets.shape[0] == 0:
        raise ValueError("offsets is empty: replace it (length nblocks + 1) before the values")
    stored = int(offsets[-1])  # sync: the structure's count
    if value.shape[0] != stored:
        raise ValueError(f"values must hold the {stored} entries the bitmaps store, got "
                         f"{value.shape[0]}; replace keys, bitmaps and offsets first, or "
                         f"build a new matrix with BitmapMatrix.from_blocks")
    if value.dtype == np.bool_:
        if not bool(value.all()):  # sync
            raise ValueError("a bool matrix stores no False: build one with "
                             "BitmapMatrix.from_blocks, which drops False entries")
        return None
    return value


class BitmapMatrix(ElementwiseFunctions):
    """Sparse matrix in bitmap block format, on the host (NumPy) or a GPU (CuPy).

    A non-empty 8x8 block is a key ``block_row << 32 | block_col``, a bitmap
    (element ``(r, c)`` of the block is bit ``8 * r + c``) and its values in
    bit order. All arrays are NumPy or all are CuPy; that decides where every
    operation on the matrix runs.

    Parameters
    ----------
    arg
        One of: a BitmapMatrix; a scipy.sparse matrix or array; a
        cupyx.scipy.sparse matrix; a dense 2-D NumPy or CuPy array or
        nested lists; as scipy's ``csr_array`` takes them, a shape ``(M,
        N)`` (an empty float64 matrix), COO triplets ``(values, (rows,
        cols))`` (duplicates summed, any order) or CSR arrays ``(values,
        indices, indptr)``.
    shape : (int, int), optional
        Inferred when not given: for triplets and CSR arrays as scipy infers
        it, one past the largest index (ValueError when there is none).
    dtype : dtype, optional
        Value dtype of the result; one of bool, int32, int64, float32,
        float64, complex64, complex128.
    copy : bool
        Copy the arrays of a BitmapMatrix argument.
    maxprint : int, optional
        The stored entries ``str()`` shows at most (50 by default), as
        scipy's.

    Attributes
    ----------
    keys : uint64 [nblocks]
        Strictly increasing block keys.
    bitmaps : uint64 [nblocks]
        Non-zero pattern of each block.
    offsets : int64 [nblocks + 1]
        Exclusive scan of ``popcount(bitmaps)``: block ``q``'s values are
        ``values[offsets[q]:offsets[q + 1]]``.
    values : [nnz] or None
        Values in block order, row-major inside a block; None for bool
        (pattern) matrices, whose bitmaps are the whole matrix.

    Notes
    -----
    The arrays are treated as immutable: a matrix keeps what it derives from
    them (row and column pointers, a small B's scalar rows), and a lazy
    transpose reads them. Assign a new array (``A.values = 2 * A.values``;
    the dtype follows the values) rather than changing one in place.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from bmsparse import BitmapMatrix
    >>> a = BitmapMatrix(sp.csr_array(np.array([[1.0, 0, 2], [0, 3, 0]])))
    >>> a
    <2x3 BitmapMatrix of dtype float64 with 3 stored elements in 1 8x8 blocks, on the host>
    >>> (a @ a.T).toarray()
    array([[5., 0.],
           [0., 9.]])
    """

    format = "bmp"
    ndim = 2

    def __init__(self, arg: Any, shape: Any = None, dtype: Any = None, copy: bool = False, *,
                 maxprint: int | None = None):
        if dtype is not None and not isinstance(arg, BitmapMatrix) and hasattr(arg, "astype") \
                and getattr(arg, "dtype", None) not in SUPPORTED_DTYPES:
            # an input of a dtype we do not store (int8, float16, ...): cast
            # first, as scipy does given a dtype; a dense one's entries are
            # found before (a value the cast makes 0 stays stored, as scipy's)
            sparse = _is_scipy_sparse(arg) or _is_cupyx_sparse(arg)
            arg = arg.astype(check_dtype(dtype)) if sparse else BitmapMatrix._from_dense(arg,
                                                                                        dtype)
        if isinstance(arg, BitmapMatrix):
            src = arg.copy() if copy else arg
        elif _is_scipy_sparse(arg):
            src = BitmapMatrix.from_scipy(arg)
        elif _is_cupyx_sparse(arg):
            src = BitmapMatrix.from_cupyx(arg)
        elif isinstance(arg, tuple) and len(arg) == 2 and all(map(_is_integer, arg)):
            # scipy's (M, N): an empty matrix, float64 unless dtype says
            src = BitmapMatrix.from_coo([], [], np.zeros(0, dtype=np.float64), arg)
        elif isinstance(arg, tuple) and len(arg) == 2 and isinstance(arg[1], tuple):
            if len(arg[1]) != 2:
                raise ValueError(f"COO triplets are (values, (rows, cols)): got "
                                 f"{len(arg[1])} index arrays")
            values, (rows, cols) = arg
            src = BitmapMatrix.from_coo(rows, cols, _cast_input(values, dtype, rows, cols),
                                        shape if shape is not None else
                                        _inferred_shape(rows, cols))
        elif isinstance(arg, tuple) and len(arg) == 3 and all(
                _is_array(x) or isinstance(x, (list, tuple)) for x in arg):
            # scipy's CSR triple (values, indices, indptr)
            values, indices, indptr = arg
            if shape is None:
                _check_not_0d("indptr", indptr)
                shape = (len(indptr) - 1,
                         _inferred_shape(indices, indices, "CSR", ("indices", "indices"))[1])
            src = BitmapMatrix.from_csr(indptr, indices,
                                        _cast_input(values, dtype, indices, indptr), shape)
        elif hasattr(arg, "ndim") and hasattr(arg, "dtype"):
            src = BitmapMatrix.from_dense(arg)
        elif isinstance(arg, list):  # nested lists, as scipy takes them
            src = BitmapMatrix.from_dense(arg)
        else:
            raise TypeError(f"cannot build a BitmapMatrix from {type(arg).__name__}; expected "
                            "a BitmapMatrix, a scipy or cupyx sparse matrix, a dense array "
                            "or nested lists, a shape (M, N), COO triplets (values, (rows, "
                            "cols)) or CSR arrays (values, indices, indptr)")
        if shape is not None and check_shape(shape) != src.shape:
            raise ValueError(f"shape {tuple(shape)} does not match the input's {src.shape}")
        if dtype is not None:
            src = src.astype(dtype)
        self._set(src.keys, src.bitmaps, src.offsets, src.values, src.shape, src.dtype,
                  src._nnz)
        if maxprint is not None:
            self.maxprint = maxprint

    def _store(self, attr: str, value: Any) -> None:
        """Replace block array ``attr`` ("_keys", ...) by ``value``, already checked
        (:func:`_replacement`, or arrays this library made consistent)."""
        flags = getattr(value, "flags", None)
        if flags is not None and not flags.c_contiguous:
            # kernels read every array as dense (and launch without checking)
            value = get_array_module(value).ascontiguousarray(value)
        if attr == "_values":
            # the dtype follows the values, as scipy's follows its data
            self._dtype = np.dtype(bool) if value is None else value.dtype
        setattr(self, attr, value)
        # counted again: from the values, or (a pattern) from the offsets
        self._nnz = None if self._values is None else self._values.shape[0]
        # what the cache holds derives from the keys (row pointer, column
        # order) or from every array (a small B's scalar rows): all of it goes
        self._cache.clear()

    def _store_blocks(self, keys: Any, bitmaps: Any, offsets: Any, values: Any) -> None:
        """Replace all four block arrays by consistent ones this library made:
        stored without the setters' checks (and their sync); the values
        last, the count follows them."""
        for attr, array in zip(("_keys", "_bitmaps", "_offsets", "_values"),
                               (keys, bitmaps, offsets, values)):
            self._store(attr, array)

    def _set(self, keys: Any, bitmaps: Any, offsets: Any, values: Any,
             shape: tuple[int, int], dtype: np.dtype, nnz: int | None) -> None:
        self._keys, self._bitmaps, self._offsets, self._values = keys, bitmaps, offsets, values
        self._shape = shape
        self._dtype = np.dtype(dtype)
        self._nnz = values.shape[0] if values is not None else nnz
        # the matrix whose lazy transpose this is, until the arrays are needed
        self._transpose_of: BitmapMatrix | None = None
        # the stream that made them then (on a GPU), for calls on other streams
        self._made: _derived.Made | None = None
        # arrays derived from the keys (block-row pointer, column-major
        # order) or from all of them (a small B's scalar rows), computed once
        # (the block arrays are treated as immutable) and kept with the
        # stream that made them (_keep, _derived); SpMV's kept launches are
        # kept per stream under keys of their own
        self._cache: dict[Any, Any] = {}

    # --- the block arrays (computed on first use for a lazy transpose) -----

    def _arrays(self) -> tuple[Any, Any, Any, Any]:
        source = self._transpose_of
        if source is not None:
            if source._shape[::-1] != self._shape:
                raise ValueError(f"this lazy transpose of a {self._shape[1]} x "
                                 f"{self._shape[0]} matrix was taken before the matrix was "
                                 f"resized to {source._shape[0]} x {source._shape[1]}: "
                                 "take A.T again")
            # the source is never a lazy transpose itself (A.T.T is A): its
            # arrays are read directly, and a pattern matrix's unknown nnz is
            # bounded instead of counted (a sync)
            keys = source._keys
            nnz = source._nnz if source._nnz is not None else BLOCK * BLOCK * keys.shape[0]
            *arrays, column = _transpose.transpose(keys, source._bitmaps, source._offsets,
                                                   source._values, nnz,
                                                   nblocks_along(source._shape[0]),
                                                   nblocks_along(source._shape[1]),
                                                   source._kept_column_pointer())
            self._keys, self._bitmaps, self._offsets, self._values = arrays
            # the source's count and dtype now: its arrays may have been
            # replaced since this transpose was made
            self._nnz, self._dtype = source._nnz, source._dtype
            self._transpose_of = None
            if isinstance(keys, np.ndarray):
                if column is not None:
                    source._keep("column_pointer", column)
            else:
                # an event now (after the launch), so that the reads once the
                # transpose has run cost nothing: a matrix is read often.
                # The transpose's column order is the source's, kept for
                # A.T @ x, made by the same work: one record for both
                self._made = _derived.Made(column, True, recorded=True)
                if column is not None:
                    source._cache["column_pointer"] = self._made
        elif self._made is not None:
            if self._made.done():
                self._made = None
            else:
                self._made.ready()
        return self._keys, self._bitmaps, self._offsets, self._values

    def __getstate__(self) -> dict[str, Any]:
        # what is derived and kept is bound to streams and launches (events,
        # a launch's lock): a pickle or a copy derives it again
        state = self.__dict__.copy()
        state["_cache"], state["_made"] = {}, None
        return state

    def _keep(self, key: Any, value: Any, device: bool | None = None) -> Any:
        """Keep ``value``, derived from the blocks, under ``key``; ``device``:
        made by work on the current stream (default: the matrix is on a GPU)."""
        self._cache[key] = _derived.Made(value, self.on_device if device is None else device)
        return value

    def _derived(self, key: Any) -> Any:
        """What :meth:`_keep` kept under ``key`` (None if nothing), ready for
        work on the current stream."""
        made = self._cache.get(key)
        return None if made is None else made.ready()

    keys = _BlockArray()
    bitmaps = _BlockArray()
    offsets = _BlockArray()
    values = _BlockArray()

    def _row_pointer(self) -> Any:
        """Block-row pointer (int64 [nbrows + 1]), computed once."""
        ptr = self._derived("row_pointer")
        if ptr is None:
            # the longest row stays on the device until asked for
            ptr, longest = convert.row_pointer(self.keys, nblocks_along(self.shape[0]))
            self._keep("longest_row_device", longest)
            self._keep("row_pointer", ptr)
        return ptr

    def _longest_row(self) -> int:
        """Blocks in the longest block row, computed once (with the row pointer;
        reading it is a sync)."""
        longest = self._derived("longest_row")
        if longest is None:
            self._row_pointer()
            longest = _readback.read_last(self._derived("longest_row_device"))
            self._keep("longest_row", longest, device=False)
        return longest

    def _column_pointer(self) -> tuple[Any, Any]:
        """The blocks in (block column, block row) order and the block-column
        pointer into that order (int64 [nblocks], int64 [nbcols + 1]),
        computed once (or kept from the transpose)."""
        column = self._kept_column_pointer()
        if column is None:
            column = self._keep("column_pointer", _transpose.column_pointer(
                self.keys, nblocks_along(self.shape[0]), nblocks_along(self.shape[1])))
        return column

    def _kept_column_pointer(self) -> tuple[Any, Any] | None:
        """The column pointer kept (None if none), as arrays: a transpose on
        the GPU keeps a :class:`transpose.ColumnPointer`, made arrays here."""
        column = self._derived("column_pointer")
        if column is None or type(column) is tuple:
            return column
        return column.arrays()

    def _column_order(self) -> Any:
        """The blocks in (block column, block row) order, computed once
        (without the block-column pointer for a hypersparse matrix, whose
        pointer would scale with its shape)."""
        if "column_pointer" in self._cache or not _transpose.hypersparse(
                self.keys.shape[0], nblocks_along(self.shape[1])):
            return self._column_pointer()[0]
        order = self._derived("column_order")
        if order is None:
            order = self._keep("column_order", _transpose.column_order(self.keys))
        return order

    @classmethod
    def _from_blocks(cls, keys: Any, bitmaps: Any, offsets: Any, values: Any,
                     shape: tuple[int, int], dtype: Any = None,
                     nnz: int | None = None) -> BitmapMatrix:
        """Wrap canonical arrays without checking them."""
        self = cls.__new__(cls)
        dtype = values.dtype if values is not None else np.dtype(bool) if dtype is None \
            else dtype
        self._set(keys, bitmaps, offsets, values, shape, dtype, nnz)
        return self

    @classmethod
    def from_blocks(cls, keys: Any, bitmaps: Any, values: Any,
                    shape: Any) -> BitmapMatrix:
        """A matrix from its block arrays, checked (see :meth:`check_format`).

        Parameters
        ----------
        keys, bitmaps : uint64 [nblocks]
        values : [popcount(bitmaps).sum()] or None
            None makes a pattern (bool) matrix; so do bool values, whose
            False entries are dropped (a pattern stores no False).
        shape : (int, int)
        """
        xp = get_array_module(keys, bitmaps, values)
        for name, arr in (("keys", keys), ("bitmaps", bitmaps), ("values", values)):
            # (ascontiguousarray would make a 0-d array 1-D)
            if arr is not None and getattr(arr, "ndim", 1) != 1:
                raise ValueError(f"{name} must be 1-D, got {arr.ndim}-D")
        keys, bitmaps = xp.ascontiguousarray(keys), xp.ascontiguousarray(bitmaps)
        values = None if values is None else xp.ascontiguousarray(values)
        for name, arr in (("keys", keys), ("bitmaps", bitmaps)):
            if arr.dtype != np.uint64:
                raise ValueError(f"{name} must be a 1-D uint64 array, got 1-D "
                                 f"{_dtype_named(arr, np.dtype(np.uint64))}")
        offsets = exclusive_scan(xp, popcount(bitmaps))
        self = cls.__new__(cls)
        dtype = np.dtype(bool) if values is None else values.dtype
        pattern = values is not None and values.dtype == np.bool_
        self._set(keys, bitmaps, offsets, None if pattern else values, check_shape(shape),
                  dtype, None)
        if pattern:
            if values.shape[0] != self.nnz:
                raise ValueError(f"values must have length popcount(bitmaps).sum() = "
                                 f"{self.nnz}, got {values.shape[0]}")
            self.check_format(full_check=True)
            return cls.from_coo(*self._coo_indices(), values, self.shape)
        self.check_format(full_check=True)
        return self

    # --- constructors ------------------------------------------------------

    @classmethod
    def from_coo(cls, rows: Any, cols: Any, values: Any, shape: Any) -> BitmapMatrix:
        """A matrix from COO triplets; duplicates are summed, any order.

        Parameters
        ----------
        rows, cols : integer [n]
        values : [n], scalar or None
            None (or a bool array) makes a pattern (bool) matrix.
        shape : (int, int)

        Raises
        ------
        ValueError
            An index is negative or out of range, or lengths differ.
        TypeError
            Indices are not integers, or the value dtype is unsupported.
        """
        shape = check_shape(shape)
        for name, x in (("rows", rows), ("cols", cols)):
            if not (_is_array(x) or isinstance(x, (list, tuple))):
                raise TypeError(f"{name} must be an integer array, got {type(x).__name__}")
            _check_not_0d(name, x)
        xp = get_array_module(*(x for x in (rows, cols, values) if _is_array(x)))
        # kernels read dense arrays: strided views (cupy.nonzero's) are copied;
        # an empty list is an empty index array, as scipy takes it
        rows, cols = (xp.ascontiguousarray(x) if _is_array(x) or len(x)
                      else xp.zeros(0, dtype=xp.int64) for x in (rows, cols))
        if values is not None:
            values = xp.asarray(values)
            values = (xp.full(rows.shape, values, dtype=values.dtype) if values.ndim == 0
                      else xp.ascontiguousarray(values))
        # (bool values make a pattern: False entries are dropped)
        keys, bitmaps, offsets, values = convert.coo_to_bitmap(rows, cols, values, shape)
        return cls._from_blocks(keys, bitmaps, offsets, values, shape)

    @classmethod
    def from_scipy(cls, a: Any, *, device: bool = False) -> BitmapMatrix:
        """A matrix from any scipy.sparse matrix or array.

        Explicitly stored zeros are kept, as scipy keeps them, but for stored
        False: a bool matrix is a pattern (convert ``a`` to another dtype
        first to keep them); duplicates are summed. With ``device=True`` the
        COO arrays are copied to the GPU and converted there (the paper's
        transfer + COO -> BMP).
        """
        if not _is_scipy_sparse(a):
            raise TypeError(f"expected a scipy.sparse matrix or array, got {type(a).__name__}")
        if a.ndim != 2:
            raise ValueError(f"a BitmapMatrix is 2-D, got a {a.ndim}-D sparse array of shape "
                             f"{a.shape}; reshape it, or use a dense vector (a.toarray())")
        check_dtype(a.dtype, "dtype")
        if a.format != "csr":
            coo = a.tocoo()
            rows, cols, data = coo.row, coo.col, coo.data
            if device:
                cupy = gpu_module("from_scipy(device=True)")
                rows, cols, data = cupy.asarray(rows), cupy.asarray(cols), cupy.asarray(data)
            return cls.from_coo(rows, cols, data, a.shape)
        return cls.from_csr(*(_to_xp(x, device) for x in (a.indptr, a.indices, a.data)),
                            a.shape)

    @classmethod
    def from_cupyx(cls, a: Any) -> BitmapMatrix:
        """A matrix on the GPU from any cupyx.scipy.sparse matrix, converted there."""
        if not _is_cupyx_sparse(a):
            raise TypeError(f"expected a cupyx.scipy.sparse matrix, got {type(a).__name__}")
        check_dtype(a.dtype, "dtype")
        if a.format == "csr":
            return cls.from_csr(a.indptr, a.indices, a.data, a.shape)
        coo = a.tocoo()
        return cls.from_coo(coo.row, coo.col, coo.data, a.shape)

    @classmethod
    def from_csr(cls, indptr: Any, indices: Any, values: Any, shape: Any) -> BitmapMatrix:
        """A matrix from CSR arrays (any column order; duplicates are summed).

        Parameters
        ----------
        indptr : integer [nrows + 1]
        indices : integer [nnz]
        values : [nnz] or None
            None (or bool values) makes a pattern (bool) matrix.
        shape : (int, int)
        """
        shape = check_shape(shape)
        # lists and tuples as from_coo (and scipy) take them; an empty one of
        # indices is an empty index array
        indptr, indices = (np.asarray(x, dtype=None if len(x) else np.int64)
                           if isinstance(x, (list, tuple)) else x for x in (indptr, indices))
        values = np.asarray(values) if isinstance(values, (list, tuple)) else values
        for name, x in (("indptr", indptr), ("indices", indices), ("values", values)):
            _check_not_0d(name, x)
        indptr, indices = (_contiguous(x) for x in (indptr, indices))
        values = None if values is None else _contiguous(values)
        if values is not None and values.dtype == np.bool_:
            # checked here: the rows from indptr and the False entries'
            # filter would meet bad input first (with NumPy's errors)
            convert.check_csr(indptr, indices, values, shape)
            convert.check_indptr(indptr, indices.shape[0])
            return cls.from_coo(convert._csr_rows(get_array_module(indptr), indptr), indices,
                                values, shape)
        blocks, rows = convert.csr_to_bitmap_rows(indptr, indices, values, shape)
        m = cls._from_blocks(*blocks, shape)
        if rows is not None:  # found by the conversion: no launch or sync when asked for
            m._keep("row_pointer", rows[0])
            m._keep("longest_row", rows[1], device=False)
        return m

    @classmethod
    def from_dense(cls, a: Any) -> BitmapMatrix:
        """A matrix from a dense 2-D NumPy or CuPy array or nested lists (its non-zeros)."""
        return cls._from_dense(a)

    @classmethod
    def _from_dense(cls, a: Any, cast: Any = None) -> BitmapMatrix:
        """:meth:`from_dense`; with ``cast``, ``a`` may be of a dtype not stored:
        its entries are found first, then cast (a value the cast makes 0
        stays stored, as scipy's)."""
        a = _as_operand(a)  # numpy.matrix: its fancy indexing keeps two dimensions
        xp = get_array_module(a)
        if a.ndim != 2:
            raise ValueError(f"expected a 2-D array, got {a.ndim}-D")
        if cast is None:
            check_dtype(a.dtype, "dtype")
        rows, cols = xp.nonzero(a)
        values = None if a.dtype == np.bool_ else a[rows, cols]
        if cast is not None:
            values = values.astype(check_dtype(cast))
        return cls.from_coo(rows, cols, values, a.shape)

    # --- attributes --------------------------------------------------------

    @property
    def shape(self) -> tuple[int, int]:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        # a lazy transpose's is its source's: the source's values may have
        # been replaced (and the dtype with them) since it was made
        if self._transpose_of is not None:
            return self._transpose_of.dtype
        return self._dtype

    @property
    def nblocks(self) -> int:
        """Number of stored (non-empty) 8x8 blocks."""
        if self._transpose_of is not None:
            return self._transpose_of.nblocks
        return int(self._keys.shape[0])

    @property
    def size(self) -> int:
        """Number of stored elements (explicit zeros included), as scipy's ``size``."""
        return self.nnz

    @property
    def nnz(self) -> int:
        """Number of stored elements (explicit zeros included)."""
        if self._transpose_of is not None:
            return self._transpose_of.nnz
        if self._nnz is None:
            self._nnz = _readback.read_last(self.offsets)  # sync: pattern matrices count bits
        return self._nnz

    @property
    def on_device(self) -> bool:
        """True when the arrays are CuPy arrays on a GPU."""
        if self._transpose_of is not None:
            return self._transpose_of.on_device
        return not isinstance(self._keys, np.ndarray)

    @property
    def has_canonical_format(self) -> bool:
        """Always True: keys are unique and sorted, no bitmap is empty."""
        return True

    @property
    def maxprint(self) -> int:
        """The stored entries ``str(A)`` shows at most, as scipy's (50 unless
        set on this matrix or given to its constructor; copies start at 50,
        as scipy's do)."""
        return self.__dict__.get("_maxprint", MAXPRINT)

    @maxprint.setter
    def maxprint(self, value: Any) -> None:
        value = operator_index(value, "maxprint")
        if value < 0:
            raise ValueError(f"maxprint must be non-negative, got {value}")
        self._maxprint = value

    @property
    def has_sorted_indices(self) -> bool:
        """Always True, as :attr:`has_canonical_format`."""
        return True

    def sum_duplicates(self) -> None:
        """Nothing to do, as scipy's on a canonical matrix: no entry is stored twice."""

    def sort_indices(self) -> None:
        """Nothing to do, as scipy's on a canonical matrix: entries are stored in order."""

    def sorted_indices(self) -> BitmapMatrix:
        """A copy (:meth:`copy`), as scipy's: the entries are in order already."""
        return self.copy()

    def prune(self) -> None:
        """Nothing to do, as scipy's after its arrays were trimmed: a matrix's
        arrays hold its stored entries and no more."""

    @property
    def T(self) -> BitmapMatrix:
        # transpose()'s result without its argument checks: ``A.T @ x`` is a
        # hot path
        source = self._transpose_of
        return source if source is not None else self._lazy_transpose()

    def _lazy_transpose(self) -> BitmapMatrix:
        """A transpose sharing this matrix's arrays until its own are needed."""
        t = BitmapMatrix.__new__(BitmapMatrix)
        t._set(None, None, None, None, self._shape[::-1], self._dtype, self._nnz)
        t._transpose_of = self
        return t

    def _xp(self) -> Any:
        """numpy or cupy; ValueError when the arrays are on another GPU than
        the current one (get_array_module), before CuPy's own kernels would
        read them there through peer access."""
        return get_array_module(self._block_source().keys)

    def _with_values(self, values: Any) -> BitmapMatrix:
        """This matrix's structure (copied) with ``values``."""
        return BitmapMatrix._from_blocks(self.keys.copy(), self.bitmaps.copy(),
                                         self.offsets.copy(), values, self.shape)

    def _block_source(self) -> BitmapMatrix:
        """The matrix holding the arrays: the source of a lazy transpose, else self."""
        return self._transpose_of if self._transpose_of is not None else self

    def __bool__(self) -> bool:
        # as scipy.sparse: only a 1x1 matrix has a truth value (``if A:``
        # would otherwise be true for any matrix, an all-zero one included)
        if self.shape == (1, 1):
            return self.nnz != 0
        raise ValueError(f"the truth value of a {self.shape[0]}x{self.shape[1]} matrix is "
                         "ambiguous; use A.nnz != 0 or A.count_nonzero() != 0")

    # --- comparisons, as scipy's: a bool matrix of the entries where they
    # hold (see bmsparse._compare); a dense one with a dense operand

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return _compare(self, other, "==")

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return _compare(self, other, "!=")

    def __lt__(self, other: Any) -> Any:
        return _compare(self, other, "<")

    def __gt__(self, other: Any) -> Any:
        return _compare(self, other, ">")

    def __le__(self, other: Any) -> Any:
        return _compare(self, other, "<=")

    def __ge__(self, other: Any) -> Any:
        return _compare(self, other, ">=")

    def __getitem__(self, key: Any) -> Any:
        """``A[key]``, as scipy's ``csr_array`` indexes (see :mod:`bmsparse._indexing`).

        Parameters
        ----------
        key : int, slice, int or bool array or list, Ellipsis, or a pair of these
            A single key indexes rows; index arrays are on the matrix's side
            (NumPy or CuPy; lists on both). A sparse bool mask (scipy's, or a
            BitmapMatrix) of the matrix's shape, or a 1-D one of an axis,
            selects as a dense one.

        Returns
        -------
        scalar, 1-D array or BitmapMatrix
            Two integers: a NumPy scalar of the matrix's dtype (on the GPU a
            0-d CuPy array, without a sync). An integer with a slice or 1-D
            array, or paired 1-D arrays: a dense 1-D array in the matrix's
            library (scipy returns a 1-D ``coo_array``, or for paired arrays
            an ndarray too). Otherwise a BitmapMatrix, stored zeros kept.

        Raises
        ------
        IndexError
            An index out of range, an unsupported key (``None``, floats), a
            mask of the wrong length, or arrays that do not broadcast.
        TypeError
            A NumPy index array for a matrix on the GPU, or a CuPy one on the host.

        Examples
        --------
        >>> import numpy as np
        >>> from bmsparse import BitmapMatrix
        >>> a = BitmapMatrix(np.array([[1.0, 0, 2], [0, 3, 0], [4, 0, 5]]))
        >>> a[2, 0], a[1]
        (np.float64(4.0), array([0., 3., 0.]))
        >>> a[[2, 0], 1:].toarray()
        array([[0., 5.],
               [0., 2.]])
        """
        from ._indexing import getitem

        return getitem(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        raise TypeError("BitmapMatrix does not support item assignment: its structure is "
                        "immutable; build a new matrix instead, e.g. s = A.to_scipy(); "
                        "s[key] = value; A = BitmapMatrix(s), or by arithmetic (A + B, "
                        "A.multiply(mask)) or from_coo")

    __hash__ = object.__hash__  # hashable by identity, as before

    def __len__(self) -> int:
        # as scipy.sparse: a matrix has no one length (iterating still goes
        # by rows, through __getitem__)
        raise TypeError("sparse matrix length is ambiguous; use A.nnz or A.shape[0]")

    def __repr__(self) -> str:
        where = "on the GPU" if self.on_device else "on the host"
        return (f"<{self.shape[0]}x{self.shape[1]} BitmapMatrix of dtype {self.dtype.name} "
                f"with {self.nnz} stored elements in {self.nblocks} {BLOCK}x{BLOCK} blocks, "
                f"{where}>")

    def __str__(self) -> str:
        """The repr, then the stored entries as scipy.sparse prints them
        (``(row, col)`` and the value, a tab between), in their stored
        order: block by block, each block's entries row by row. Of more than
        ``maxprint`` (50 unless set), the first and last ``maxprint // 2``
        with a ``:`` line between, as scipy's; only the blocks holding them
        are read."""
        lines = [repr(self)]
        nnz = self.nnz
        if nnz:
            most = self.maxprint
            half = most // 2
            spans = [(0, nnz)] if nnz <= most else [(0, half), (nnz - half, nnz)]
            lines.append("  Coords\tValues")
            for k, (start, stop) in enumerate(spans):
                if k:
                    lines.append("  :\t:")
                # (str: format() of a NumPy float32 goes through a Python float)
                lines += [f"  ({r}, {c})\t{v!s}" for r, c, v in self._host_entries(start, stop)]
        return "\n".join(lines)

    def _host_entries(self, start: int, stop: int) -> list[tuple[int, int, Any]]:
        """Stored entries ``[start, stop)``, in the values' order, as
        ``(row, col, value)`` on the host: the blocks holding them alone are
        read (and copied from the GPU)."""
        xp = self._xp()
        offsets = self.offsets

        def bound(at: int, side: str) -> Any:
            return xp.searchsorted(offsets, xp.full(1, at, dtype=offsets.dtype), side=side)

        # (two reads from the GPU: the blocks, then their first values)
        lo, hi = xp.concatenate([bound(start, "right") - 1, bound(stop, "left")]).tolist()
        first, last = offsets[[lo, hi]].tolist()
        values = None if self.values is None else self.values[first:last]
        part = BitmapMatrix._from_blocks(self.keys[lo:hi], self.bitmaps[lo:hi],
                                         offsets[lo:hi + 1] - first, values, self.shape,
                                         self.dtype, last - first).get()
        rows, cols = part._coo_indices()
        span = slice(start - first, stop - first)
        return list(zip(rows[span].tolist(), cols[span].tolist(), part._data()[span]))

    def memory_usage(self) -> dict[str, int]:
        """Bytes held by each array, plus ``index`` and ``total``.

        ``index`` counts keys, bitmaps and offsets; the paper's Table 1 counts
        keys and bitmaps only (offsets can be recomputed by a scan), given as
        ``index_paper``.
        """
        sizes = {"keys": self.keys.nbytes, "bitmaps": self.bitmaps.nbytes,
                 "offsets": self.offsets.nbytes,
                 "values": 0 if self.values is None else self.values.nbytes}
        sizes["index"] = sizes["keys"] + sizes["bitmaps"] + sizes["offsets"]
        sizes["index_paper"] = sizes["keys"] + sizes["bitmaps"]
        sizes["total"] = sizes["index"] + sizes["values"]
        return sizes

    def check_format(self, full_check: bool = False) -> None:
        """Check the invariants; the array scans run only with ``full_check``.

        Raises
        ------
        ValueError
            An invariant does not hold (the message names it).
        """
        xp = get_array_module(self.keys, self.bitmaps, self.offsets, self.values)
        for name in ("keys", "bitmaps", "offsets"):
            problem = _block_array_problem(name, getattr(self, name))
            if problem is not None:
                raise ValueError(problem)
        if self.keys.shape != self.bitmaps.shape:
            raise ValueError(f"keys and bitmaps must have the same length, got "
                             f"{self.keys.shape[0]} and {self.bitmaps.shape[0]}")
        if self.offsets.shape != (self.nblocks + 1,):
            raise ValueError(f"offsets must have length nblocks + 1 = {self.nblocks + 1}, "
                             f"got {self.offsets.shape[0]}")
        if (self.values is None) != (self.dtype == np.bool_):
            raise ValueError(f"a {self.dtype.name} matrix must have "
                             f"{'no values (a pattern)' if self.dtype == np.bool_ else 'values'}"
                             f", got {'none' if self.values is None else 'some'}")
        if self.values is not None:
            check_dtype(self.values.dtype, "values dtype")
            if self.values.ndim != 1:
                raise ValueError(f"values must be 1-D, got {self.values.ndim}-D")
            if self.values.dtype != self.dtype:
                raise ValueError(f"values must be of the matrix's dtype {self.dtype.name}, got "
                                 f"{self.values.dtype.name}; use astype() to change it")
        if not full_check:
            return
        _check_blocks(xp, self)

    def eliminate_zeros(self) -> None:
        """Drop the stored zeros (-0.0 too; NaN stays), in place, as scipy's.

        The matrix gets new arrays through the attribute setters, so what it
        derived from the old ones (row pointer, SpMV launches) is dropped; no
        array is written in place, so a matrix that shares arrays with this
        one (``astype(copy=False)``) keeps its entries, as does an ``A.T``
        already used. A lazy ``A.T`` taken before and not yet used computes
        its blocks from the new arrays; but where A is itself a lazy
        transpose (``A = X.T``), ``A.T`` is X, which keeps its entries. A
        pattern (bool) matrix stores no False: nothing to drop.

        Notes
        -----
        SpGEMM's compaction (:func:`bmsparse.spgemm.compact.compact`), which
        drops the entries of C that cancel: O(nblocks + nnz); on the GPU one
        sync to learn whether a zero is stored, one more to size the result.
        Nothing is replaced when no stored zero is found.
        """
        from .spgemm import compact

        values = self.values
        if values is None:
            return
        zeros = (values == 0).sum(dtype=np.int64).reshape(1)
        blocks = compact.compact(self.keys, self.bitmaps, self.offsets, values, None, zeros)
        if blocks[3] is not values:
            self._store_blocks(*blocks)

    def setdiag(self, values: Any, k: int = 0) -> None:
        """Set the entries of diagonal ``k``, in place, as scipy's.

        Parameters
        ----------
        values : scalar or 1-D array
            A scalar sets the whole diagonal; an array its first entries
            (a longer one is cut, a shorter one leaves the rest as it was).
            Cast to the matrix's dtype; a zero is stored (scipy stores it
            too), but a bool matrix stores no False: a False entry is removed.
            On the GPU, a CuPy array or a scalar.
        k : int
            0 the main diagonal, above it positive.

        Raises
        ------
        ValueError
            ``k`` lies past the matrix (scipy's "k exceeds array
            dimensions"), or ``values`` is not 1-D.

        Notes
        -----
        The matrix gets new arrays as :meth:`eliminate_zeros` does (what it
        derived from the old ones is dropped): its entries off the diagonal
        and the new ones through the COO conversion, O(nnz log nnz).
        ``A.setdiag(0); A.eliminate_zeros()`` removes a graph's self-loops.
        """
        k = operator_index(k, "k")
        m, n = self.shape
        # (as scipy's: the main diagonal of a matrix with no rows or columns
        # is empty, not past it)
        if (k > 0 and k >= n) or (k < 0 and -k >= m):
            raise ValueError("k exceeds array dimensions")
        xp = self._xp()
        if _is_array(values):
            get_array_module(self.keys, values)  # (TypeError for a host / GPU mix)
        first = max(-k, 0)
        length = min(m - first, n - first - k)
        values = xp.asarray(values)
        if values.ndim > 1:
            raise ValueError(f"values must be a scalar or 1-D, got {values.ndim}-D")
        count = length if values.ndim == 0 else min(length, values.shape[0])
        rows = xp.arange(first, first + count, dtype=xp.int64)
        new = xp.broadcast_to(values, (count,)) if values.ndim == 0 else values[:count]
        old_rows, old_cols = self._coo_indices()
        # the old entries of those places go: the new ones replace them
        off = (old_cols - old_rows != k) | (old_rows >= first + count)
        kept = xp.flatnonzero(off)
        a = BitmapMatrix.from_coo(xp.concatenate([old_rows[kept], rows]),
                                  xp.concatenate([old_cols[kept], rows + k]),
                                  xp.concatenate([self._data()[kept],
                                                  new.astype(self.dtype, copy=False)]),
                                  self.shape)
        self._store_blocks(*a._arrays())

    # --- conversions -------------------------------------------------------

    def get(self) -> BitmapMatrix:
        """This matrix with NumPy arrays (a host copy; self when on the host)."""
        if not self.on_device:
            return self
        # sync: the copy to the host is what get() is for
        values = None if self.values is None else self.values.get()
        return BitmapMatrix._from_blocks(self.keys.get(), self.bitmaps.get(),
                                         self.offsets.get(), values, self.shape, self.dtype,
                                         self._nnz)

    def to_device(self) -> BitmapMatrix:
        """This matrix with CuPy arrays on the current GPU: self when already
        there, else a copy (from the host, or from another GPU)."""
        source = self._transpose_of
        if source is not None:  # a lazy transpose: its source moves
            moved = source.to_device()
            return self if moved is source else moved.T
        cupy = gpu_module("to_device")
        if self.on_device and self._keys.data.device_id == cupy.cuda.runtime.getDevice():
            return self
        # cupy.array copies onto the current device, from the host or a peer
        values = None if self._values is None else cupy.array(self._values)
        return BitmapMatrix._from_blocks(cupy.array(self._keys), cupy.array(self._bitmaps),
                                         cupy.array(self._offsets), values, self.shape,
                                         self.dtype, self._nnz)

    def copy(self) -> BitmapMatrix:
        """This matrix with arrays of its own (a lazy transpose's blocks are
        computed), on the same side; nothing derived is carried over."""
        self._xp()  # (the device check)
        values = None if self.values is None else self.values.copy()
        return BitmapMatrix._from_blocks(self.keys.copy(), self.bitmaps.copy(),
                                         self.offsets.copy(), values, self.shape, self.dtype,
                                         self._nnz)

    def astype(self, dtype: Any, casting: str = "unsafe", copy: bool = True) -> BitmapMatrix:
        """This matrix with values cast to ``dtype``, under NumPy's ``casting``
        rule (scipy's signature: ``astype(dtype, 'safe')`` checks the cast).

        To bool, entries that are zero are dropped: a bool matrix is a
        pattern and stores no False (scipy keeps them as stored False).
        """
        dtype = check_dtype(dtype)
        if casting != "unsafe" and not np.can_cast(self.dtype, dtype, casting):
            raise TypeError(f"cannot cast the values from {self.dtype.name} to {dtype.name} "
                            f"by the rule {casting!r}")
        if dtype == self.dtype:
            return self.copy() if copy else self
        if dtype == np.bool_:
            # like scipy, an explicit zero casts to a stored False; a pattern
            # matrix cannot hold False, so drop those entries
            return BitmapMatrix.from_coo(*self._coo_indices(), self.values != 0, self.shape)
        xp = self._xp()
        values = (xp.ones(self.nnz, dtype=dtype) if self.values is None
                  else self.values.astype(dtype))
        index = (self.keys, self.bitmaps, self.offsets)
        if copy:
            index = tuple(a.copy() for a in index)
        return BitmapMatrix._from_blocks(*index, values, self.shape)

    def _coo_indices(self) -> tuple[Any, Any]:
        return convert.bitmap_to_coo(self.keys, self.bitmaps, self.offsets, self.nnz)

    def _data(self) -> Any:
        return self._xp().ones(self.nnz, dtype=bool) if self.values is None else self.values

    def tocoo(self, copy: bool = False) -> Any:
        """COO form in the same library: scipy ``coo_array`` or cupyx ``coo_matrix``.

        Its arrays are its own (the values are copied, whatever ``copy``): a
        matrix's arrays are never written, and what it derives from them is
        kept.
        """
        if self.on_device:
            check_cupyx_dtype(self.dtype, "get().tocoo() or astype()")
        rows, cols = self._coo_indices()
        data = self._data()
        if data is self.values:
            data = data.copy()
        if self.on_device:
            import cupyx.scipy.sparse as csp

            return csp.coo_matrix((data, (rows, cols)), shape=self.shape)
        import scipy.sparse as sp

        return sp.coo_array((data, (rows, cols)), shape=self.shape)

    def tocsr(self, copy: bool = False) -> Any:
        """CSR form in the same library: scipy ``csr_array`` or cupyx ``csr_matrix``.

        Column indices come out sorted and without duplicates; no sort is
        needed. Its arrays are new whatever ``copy`` (scipy's argument).
        """
        if self.on_device:
            check_cupyx_dtype(self.dtype, "to_scipy() or astype()")
        return csr_from_arrays(self._xp(), *self._csr_arrays(), self.shape)

    def tocsc(self, copy: bool = False) -> Any:
        """CSC form in the same library: scipy ``csc_array`` or cupyx ``csc_matrix``
        (new arrays whatever ``copy``, scipy's argument).

        Row indices come out sorted and without duplicates. Made from the
        CSR form of ``A.T`` (the transpose's blocks are computed, once).
        """
        if self.on_device:
            check_cupyx_dtype(self.dtype, "to_scipy().tocsc() or astype()")
        out = self.T.tocsr().T  # the CSR arrays of A.T are A's CSC arrays
        out.has_sorted_indices = True
        return out

    def tobsr(self, blocksize: tuple[int, int] | None = None, copy: bool = False) -> Any:
        """scipy's ``bsr_array`` (on the host only; ``blocksize`` as scipy's)."""
        out = self.asformat("bsr")
        return out if blocksize is None else out.tobsr(blocksize=blocksize)

    def todia(self, copy: bool = False) -> Any:
        """scipy's ``dia_array`` (on the host only)."""
        return self.asformat("dia")

    def todok(self, copy: bool = False) -> Any:
        """scipy's ``dok_array`` (on the host only)."""
        return self.asformat("dok")

    def tolil(self, copy: bool = False) -> Any:
        """scipy's ``lil_array`` (on the host only)."""
        return self.asformat("lil")

    def asformat(self, format: str | None, copy: bool = False) -> Any:
        """This matrix in ``format``, as scipy's ``asformat``.

        Parameters
        ----------
        format : str or None
            None or "bmp": this matrix (a copy with ``copy``); "csr", "csc",
            "coo": :meth:`tocsr`, :meth:`tocsc`, :meth:`tocoo`; "array" or
            "dense": :meth:`toarray`; on the host also scipy's other formats
            ("bsr", "dia", "lil" through :meth:`tocsr`, "dok" through
            :meth:`tocoo`).
        copy : bool
            For None and "bmp"; the other formats are new arrays anyway.

        Raises
        ------
        ValueError
            ``format`` is not one of these.
        """
        if format is None or format == self.format:
            return self.copy() if copy else self
        if format in ("csr", "csc", "coo"):
            return getattr(self, "to" + format)()
        if format in ("array", "dense"):
            return self.toarray()
        if format in ("bsr", "dia", "dok", "lil"):
            if self.on_device:
                raise ValueError(f"format {format!r} is not one cupyx.scipy.sparse converts "
                                 "to; use A.get().asformat(format)")
            # DOK from COO, as scipy makes it: no index pointer of nrows + 1
            # words, which a hypersparse matrix could not afford
            return (self.tocoo() if format == "dok" else self.tocsr()).asformat(format)
        raise ValueError(f"format {format!r} is unknown; use one of None, 'bmp', 'csr', "
                         "'csc', 'coo', 'bsr', 'dia', 'dok', 'lil', 'array', 'dense'")

    def _csr_arrays(self, values: bool = True) -> tuple[Any, Any, Any]:
        """indptr, indices, data; without ``values``, data of ones (bool)."""
        return convert.bitmap_to_csr(self.keys, self.bitmaps, self.offsets,
                                     self.values if values else None,
                                     self.shape, self.nnz,
                                     self._row_pointer() if self.on_device else None)

    def to_scipy(self) -> Any:
        """scipy.sparse ``csr_array`` on the host (converted on the GPU, then copied)."""
        if not self.on_device:
            return self.tocsr()
        import scipy.sparse as sp

        indptr, indices, data = self._csr_arrays()
        # sync: the copy to the host is what to_scipy() is for
        out = sp.csr_array((data.get(), indices.get(), indptr.get()), shape=self.shape)
        out.has_sorted_indices = True
        return out

    def to_cupyx(self) -> Any:
        """cupyx.scipy.sparse ``csr_matrix`` on the GPU (copies to it if needed)."""
        return self.to_device().tocsr()

    def nonzero(self) -> tuple[Any, Any]:
        """Rows and columns (int64) of the stored entries that are not zero,
        in row-major order, as scipy's ``nonzero``.

        Made from the COO form: memory scales with the entries, not the rows
        (a CSR form of a hypersparse matrix would need ``nrows + 1`` words).
        """
        from . import _primitives

        xp = self._xp()
        rows, cols = self._coo_indices()
        keep = self._data() != 0
        rows, cols = rows[keep], cols[keep]
        # entries come in (block, bit) order: within a row, by block column
        # then column in the block, so a stable sort by row gives row-major
        order = _primitives.stable_argsort(xp, rows)
        return rows[order], cols[order]

    def todense(self, order: str | None = None, out: Any = None) -> Any:
        """Dense 2-D array in the same library (:meth:`toarray`; scipy's sparse
        arrays return an ndarray here too)."""
        return self.toarray(order, out)

    def toarray(self, order: str | None = None, out: Any = None) -> Any:
        """Dense 2-D array in the same library.

        Parameters
        ----------
        order : {"C", "F"}, optional
            Row-major (the default) or column-major.
        out : array, optional
            Of this matrix's shape and dtype, in its library: filled and
            returned instead of a new array, as scipy's.

        Raises
        ------
        ValueError
            Its bytes would not fit in 63 bits (NumPy's "array is too big";
            CuPy's size overflows there instead); ``order`` is neither; ``out``
            differs in shape or dtype.
        TypeError
            ``out`` is no array, or is on the other side (host or GPU).
        """
        xp = self._xp()
        m, n = self.shape
        order = order.upper() if isinstance(order, str) else order
        if order not in (None, "C", "F"):
            raise ValueError(f"order must be 'C', 'F' or None, got {order!r}")
        if out is not None and order is not None:
            raise ValueError("give order or out, not both (out has its own order)")
        if out is not None:
            _check_out(out, xp)
            if tuple(out.shape) != self.shape or out.dtype != self.dtype:
                raise ValueError(f"out must be a {m} x {n} array of {self.dtype}, got "
                                 f"{' x '.join(map(str, out.shape))} of {out.dtype}")
            out[...] = 0
        elif m * n * self.dtype.itemsize >= 1 << 63:
            raise ValueError(f"array is too big: a dense {m} x {n} array of {self.dtype} "
                             f"would take {m * n * self.dtype.itemsize} bytes")
        else:
            out = xp.zeros(self.shape, dtype=self.dtype, order=order or "C")
        rows, cols = self._coo_indices()
        out[rows, cols] = self._data()
        return out

    def reshape(self, *shape: Any, order: str = "C", copy: bool = False) -> BitmapMatrix:
        """The same entries in a matrix of another shape, as scipy's: each
        entry moves to the place of its position in row-major order
        (``order="C"``) or column-major order (``"F"``). Stored zeros stay.

        Parameters
        ----------
        *shape : (int, int) or two ints
            One of them negative for "what is left", as scipy's.
        order : {"C", "F"}
        copy : bool
            With the same shape: a copy rather than this matrix.

        Raises
        ------
        ValueError
            The sizes differ, the shape is not 2-D (a BitmapMatrix is a
            matrix), two dimensions are unknown, the order is neither, or
            the matrix has 2^63 entries or more (positions are int64).
        """
        target = _reshape_target(shape, self.shape)
        if order not in ("C", "F"):
            raise ValueError("'order' must be 'C' or 'F'")
        if target == self.shape:
            return self.copy() if copy else self
        m, n = self.shape
        if m * n >= 1 << 63:
            raise ValueError(f"cannot reshape a {m} x {n} matrix: an entry's position would "
                             "not fit in int64")
        xp = self._xp()
        if not m * n:
            return BitmapMatrix.from_coo(xp.zeros(0, dtype=xp.int64), xp.zeros(0, dtype=xp.int64),
                                         self.values, target)
        rows, cols = self._coo_indices()
        if order == "C":
            rows, cols = xp.divmod(rows * n + cols, target[1])
        else:
            cols, rows = xp.divmod(cols * m + rows, target[0])
        return BitmapMatrix.from_coo(rows, cols, self.values, target)

    def resize(self, *shape: Any) -> None:
        """Change the shape in place, as scipy's: entries inside the new
        shape stay where they are (stored zeros too), those outside go.

        A lazy transpose taken before (``A.T`` whose blocks are not made
        yet) raises when its blocks are needed afterwards: take ``A.T``
        again (scipy's keeps the matrix as it was).

        Raises
        ------
        ValueError
            The shape is not a pair of non-negative integers up to 2^35.
        """
        target = check_shape(shape[0] if len(shape) == 1 else shape)
        self._arrays()  # a lazy transpose's own blocks first
        m, n = self.shape
        if target == (m, n):
            return
        if target[0] < m or target[1] < n:
            from ._select import crop

            self._store_blocks(*crop(self, target)._arrays())
        self._shape = target
        self._cache.clear()

    def transpose(self, axes: Any = None, copy: bool = False) -> BitmapMatrix:
        """The transpose, as a BitmapMatrix that shares this one's arrays until needed.

        ``axes`` is None or ``(1, 0)``, as scipy takes it; ``copy=True``
        gives a transpose with arrays of its own at once.

        ``A.T @ x``, ``A.T.sum(axis)`` and ``A.T.T`` read A's arrays directly;
        anything else that needs the blocks of A.T computes them once (a
        block-local transpose, see :mod:`bmsparse.transpose`). Unlike
        scipy's, the result shares A's values only until then: its blocks
        are its own afterwards (A's values reordered), and ``A.T.T`` is A
        only before. Change neither in place; assign new arrays instead.

        Notes
        -----
        O(1) until the blocks are needed; then one stable sort of A's block
        columns (kept with A, as ``A.T @ x`` uses it too) and O(nblocks +
        nnz) work, no sync.
        """
        # (a non-sequence, such as an int, is refused too: tuple() of it
        # would raise a TypeError that names no argument)
        if axes is not None and (not isinstance(axes, (tuple, list))
                                 or tuple(axes) != (1, 0)):
            raise ValueError("sparse arrays do not take an 'axes' other than (1, 0): swapping "
                             "the dimensions is the only permutation")
        t = self._transpose_of if self._transpose_of is not None else self._lazy_transpose()
        return t.copy() if copy else t

    # --- arithmetic --------------------------------------------------------

    __array_priority__ = 10.1  # CuPy arrays defer to our reflected operators, as to scipy's
    __array_ufunc__ = None     # NumPy arrays and scalars do too

    def __matmul__(self, other: Any) -> Any:
        if type(other) is _kernels._NDARRAY:  # a CuPy array (None before CuPy's first use)
            y = kept_product(self, other, False)
            if y is not None:
                return y
        other = _as_operand(other)
        if _is_dense(other):  # first, and importing only SpMV: the cheapest path
            from .spmv import matmul_dense

            source = self._transpose_of
            if source is not None:
                return matmul_dense(source, other, True, False)
            return matmul_dense(self, other, False, False)
        from .spgemm import spgemm

        if isinstance(other, BitmapMatrix):
            return spgemm(self, other)
        if _is_scipy_sparse(other) or _is_cupyx_sparse(other):
            return spgemm(self, BitmapMatrix(other))
        if _is_scalar(other):
            raise ValueError("scalar operands are not allowed, use '*' instead")
        return NotImplemented

    def __rmatmul__(self, other: Any) -> Any:
        if type(other) is _kernels._NDARRAY:  # x @ A for a vector x is A.T @ x
            y = kept_product(self, other, True)
            if y is not None:
                return y
        from .spgemm import spgemm
        from .spmv import matmul_dense

        other = _as_operand(other)
        if _is_scipy_sparse(other) or _is_cupyx_sparse(other):
            return spgemm(BitmapMatrix(other), self)
        if _is_dense(other):
            # x @ A is A.T @ x; X @ A is (A.T @ X.T).T, written C-ordered
            source, transpose = ((self._transpose_of, False) if self._transpose_of is not None
                                 else (self, True))
            if other.ndim == 2:
                return matmul_dense(source, other.T, transpose, True, left=True)
            return matmul_dense(source, other, transpose, False, left=True)
        if _is_scalar(other):
            raise ValueError("scalar operands are not allowed, use '*' instead")
        return NotImplemented

    def __add__(self, other: Any) -> Any:
        return self._add(other, "plus")

    def __radd__(self, other: Any) -> Any:
        return self._add(other, "plus")

    def __sub__(self, other: Any) -> Any:
        return self._add(other, "minus")

    def __rsub__(self, other: Any) -> Any:
        from .elementwise import elementwise

        other = _as_operand(other)
        if _is_dense(other):
            return other - self._dense_operand(other)
        sparse = _as_sparse(other)
        if sparse is not None:  # (not -(self - other): a bool matrix has no negation)
            return elementwise(sparse, self, "minus")
        if _is_scalar(other):
            if other == 0:
                return -self
            raise NotImplementedError("subtracting a sparse array from a nonzero scalar is "
                                      "not supported")
        # Python then raises its TypeError, naming both operands
        return NotImplemented

    def _add(self, other: Any, op: str) -> Any:
        from .elementwise import elementwise

        other = _as_operand(other)
        sparse = _as_sparse(other)
        if sparse is not None:
            return elementwise(self, sparse, op)
        if _is_dense(other):
            dense = self._dense_operand(other)
            return dense + other if op == "plus" else dense - other
        if _is_scalar(other):
            if other == 0:
                return self.copy()
            verb = "adding a nonzero scalar to" if op == "plus" else \
                "subtracting a nonzero scalar from"
            raise NotImplementedError(f"{verb} a sparse array is not supported")
        return NotImplemented

    def _dense_operand(self, other: Any) -> Any:
        """This matrix as a dense array to combine with ``other``, which
        broadcasts to its shape (as scipy's: a row, a column, a 1x1)."""
        from .elementwise import broadcast_shape

        get_array_module(self._block_source().keys, other)
        if broadcast_shape(self.shape, other.shape) != self.shape:
            raise ValueError(f"inconsistent shapes {self.shape} and {other.shape}")
        return self.toarray()

    def __mul__(self, other: Any) -> Any:
        if _is_scalar(other):
            return self._scale(other)
        return self._multiply(other)

    def __rmul__(self, other: Any) -> Any:
        if _is_matrix_product(other):
            # a scipy *_matrix or cupyx sparse matrix on the left: there ``*``
            # is the matrix product (its own __mul__ gave way to ours)
            return self.__rmatmul__(other)
        return self.__mul__(other)

    def multiply(self, other: Any) -> BitmapMatrix:
        """Element-wise product with a sparse matrix, a dense array or a scalar.

        Parameters
        ----------
        other : BitmapMatrix, scipy/cupyx sparse matrix, dense array or scalar
            A sparse operand has this shape; a dense one broadcasts to it.

        Returns
        -------
        BitmapMatrix
            With a sparse operand, entries that come out exactly zero are
            dropped (as scipy does); with a dense one or a scalar, this
            matrix's structure is kept, zeros included (scipy's too).

        Raises
        ------
        ValueError
            The shapes differ (a dense operand that does not broadcast to
            this shape).
        TypeError
            Host and device operands are mixed, or ``other`` is none of these.
        NotImplementedError
            A dense operand that would broadcast this matrix to a larger shape.
        """
        out = self._multiply(other)
        if out is NotImplemented:
            raise TypeError("multiply: other must be a sparse matrix, a dense array or a "
                            f"scalar, got {type(other).__name__}")
        return out

    def _multiply(self, other: Any) -> Any:
        """:meth:`multiply`, or NotImplemented for an operand it does not take."""
        from .elementwise import broadcast_shape, elementwise

        other = _as_operand(other)
        if _is_scalar(other):
            return self._scale(other)
        sparse = _as_sparse(other)
        if sparse is not None:
            return elementwise(self, sparse, "times")
        if not _is_dense(other):
            return NotImplemented
        get_array_module(self._block_source().keys, other)
        shape = broadcast_shape(self.shape, other.shape)
        if shape != self.shape:
            raise NotImplementedError(f"multiplying a {self.shape} matrix by a dense "
                                      f"{other.shape} array broadcasts it to {shape}; "
                                      "not supported")
        dtype = upcast(self.dtype, other.dtype)
        rows, cols = self._coo_indices()
        # other's entry of each stored one: its index 0 along a broadcast axis
        # (not broadcast_to: NumPy refuses views of more than 2**63 entries)
        other = other.reshape((1,) * (2 - other.ndim) + other.shape)
        factor = other[rows if other.shape[0] != 1 else 0 * rows,
                       cols if other.shape[1] != 1 else 0 * cols]
        # a pattern's entries multiply as True, as NumPy (and scipy) multiply
        # them: True * (inf + 1j) is inf + nanj, not the factor itself
        values = (self._data() * factor).astype(dtype)
        if dtype == np.bool_:
            return BitmapMatrix.from_coo(rows, cols, values, self.shape)
        return self._with_values(values)

    def _scale(self, alpha: Any) -> BitmapMatrix:
        """``alpha * self``: the structure is kept, zeros included (as scipy keeps it)."""
        xp = self._xp()
        dtype = upcast(self.dtype, alpha)
        if dtype == np.bool_:
            # a pattern matrix cannot store False: scaling by False empties it
            return self.copy() if alpha else BitmapMatrix.from_coo(
                *self._coo_indices(), xp.zeros(self.nnz, dtype=bool), self.shape)
        return self._with_values(self.astype(dtype, copy=False).values * dtype.type(alpha))

    def __truediv__(self, other: Any) -> Any:
        """``A / x``, as scipy's: by a scalar, a BitmapMatrix in float64
        (complex stays complex); by a dense array, ``A.multiply(1 / x)``
        (sparse); by a sparse matrix of A's shape, the dense quotient
        (:meth:`_divide_sparse`)."""
        other = _as_operand(other)
        if _is_scalar(other):
            # as scipy: divide in float64 unless the dtype is complex
            m = self.astype(np.float64, copy=False) if np.can_cast(self.dtype, np.float64) \
                else self
            return m._scale(1 / other)
        if _is_dense(other):
            return self.multiply(self._xp().divide(1, other))
        sparse = _as_sparse(other)
        if sparse is not None:
            return self._divide_sparse(sparse)
        return NotImplemented

    def __rtruediv__(self, other: Any) -> Any:
        """``B / A`` for a scipy or cupyx sparse B (its own division does not
        take a BitmapMatrix): as ``BitmapMatrix(B) / A``. A scalar or dense
        array over a sparse matrix is refused (TypeError), as scipy's."""
        sparse = _as_sparse(other)
        if sparse is not None:
            return sparse._divide_sparse(self)
        return NotImplemented

    def _divide_sparse(self, other: BitmapMatrix) -> Any:
        """``self / other`` of two sparse matrices of one shape: a dense
        array (NumPy or CuPy, as the operands), as scipy's: every entry's
        quotient, NaN where neither stores one and inf where only self does.
        The numerator in float64 unless complex, as scipy's; the result's
        dtype is then NumPy's (scipy keeps the numerator's, and drops a
        complex denominator's imaginary part into a real one), and so is a
        complex quotient by zero (NumPy's dense division: inf + infj or nan
        + nanj, where scipy's is nan + nanj, or nan + 0j where neither
        stores an entry)."""
        if other.shape != self.shape:
            raise ValueError(f"inconsistent shapes {self.shape} and {other.shape}")
        xp = get_array_module(self._block_source().keys, other._block_source().keys)
        numerator = self.toarray()
        if np.can_cast(self.dtype, np.float64):
            numerator = numerator.astype(np.float64, copy=False)
        with np.errstate(divide="ignore", invalid="ignore"):
            return xp.true_divide(numerator, other.toarray())

    def power(self, n: Any, dtype: Any = None) -> BitmapMatrix:
        """Element-wise power of the stored values, as scipy's ``power``.

        Parameters
        ----------
        n : scalar
            Not zero: a zeroth power would fill the matrix.
        dtype : dtype, optional
            The values are cast to it first.

        Raises
        ------
        NotImplementedError
            ``n`` is not a scalar, or is zero (as scipy).
        ValueError
            A negative integer power of integer values (as NumPy).
        TypeError
            The result's dtype is not supported: a bool matrix's powers are
            int8 in NumPy; cast it first (``A.astype(numpy.int32)``).
        """
        if not _is_scalar(n):
            raise NotImplementedError("input is not scalar")
        if not n:
            raise NotImplementedError("zero power is not supported as it would densify the "
                                      "matrix; use numpy.ones(A.shape, dtype=A.dtype) for it")
        m = self if dtype is None else self.astype(dtype, copy=False)
        values = m._data()
        # the result's dtype as NumPy gives it (CuPy's own rules for a Python
        # scalar have differed between versions); NumPy's ValueError for a
        # negative integer power of integers, which CuPy would not raise
        result = np.result_type(np.ones(1, dtype=values.dtype) ** n)
        check_dtype(result, f"result dtype of a {m.dtype.name} matrix to the power {n!r}")
        return m._with_values((values ** n).astype(result, copy=False))

    def __pow__(self, n: Any) -> BitmapMatrix:
        # element-wise, as for scipy's sparse arrays (whose * is element-wise too)
        return self.power(n)

    @property
    def real(self) -> BitmapMatrix:
        """The real parts, on this matrix's structure (a copy)."""
        if self.dtype.kind != "c":
            return self.copy()
        return self._with_values(self._xp().ascontiguousarray(self.values.real))

    @property
    def imag(self) -> BitmapMatrix:
        """The imaginary parts, on this matrix's structure (stored zeros where
        the values are real, as scipy; none for bool, which stores no False)."""
        xp = self._xp()
        if self.dtype == np.bool_:
            return BitmapMatrix.from_coo(xp.zeros(0, np.int64), xp.zeros(0, np.int64), None,
                                         self.shape)
        if self.dtype.kind != "c":
            return self._with_values(xp.zeros_like(self.values))
        return self._with_values(xp.ascontiguousarray(self.values.imag))

    def conjugate(self, copy: bool = True) -> BitmapMatrix:
        """Complex conjugate of the values (the matrix itself, or a copy, otherwise)."""
        if self.dtype.kind != "c":
            return self.copy() if copy else self
        self._xp()  # (the device check)
        return self._with_values(self.values.conj())

    def conj(self, copy: bool = True) -> BitmapMatrix:
        """Complex conjugate (see :meth:`conjugate`)."""
        return self.conjugate(copy=copy)

    def dot(self, other: Any) -> Any:
        """``self @ other``, or ``self * other`` for a scalar (as scipy's
        ``dot``: a 0-d array is refused by ``@``, as there)."""
        return self * other if _is_scalar(other) and not _is_array(other) else self @ other

    def __neg__(self) -> BitmapMatrix:
        if self.dtype == np.bool_:
            raise NotImplementedError("negating a boolean sparse array is not supported")
        self._xp()  # (the device check)
        return self._with_values(-self.values)

    def __abs__(self) -> BitmapMatrix:
        if self.dtype == np.bool_:
            return self.copy()
        self._xp()  # (the device check)
        return self._with_values(abs(self.values))

    # --- reductions --------------------------------------------------------

    def sum(self, axis: int | None = None, dtype: Any = None, out: Any = None) -> Any:
        """Sum of all entries, or of each column (``axis=0``) or row (``axis=1``).

        Parameters
        ----------
        axis : {None, 0, 1, -2, -1}
        dtype : dtype, optional
            Of the sum; by default scipy's: int64 for bool and integer
            matrices, the matrix's dtype otherwise. Row and column sums
            accumulate in the default or ``dtype``, whichever is wider, and
            are then cast to ``dtype`` (as scipy's).
        out : array, optional
            Of the result's shape (``()``, n or m), in the matrix's library:
            the sum is written into it (cast to its dtype) and it is
            returned, as scipy's (``numpy.sum(A)`` passes ``out=None``).

        Returns
        -------
        scalar or 1-D array
            A NumPy scalar on the host (a 0-d CuPy array on the GPU, without
            a sync) for ``axis=None``; else a 1-D array of length n (axis 0)
            or m (axis 1) in the matrix's library; ``out`` when given.

        Raises
        ------
        ValueError
            ``axis`` is not one of the above, or ``out`` has another shape
            than the result.
        TypeError
            ``out`` is not an array, or is on the other side (host or GPU).

        Notes
        -----
        Row and column sums are ``A @ ones`` and ``ones @ A`` (see
        :func:`bmsparse.spmv`), deterministic; of a complex matrix, those of
        its real and imaginary parts (so that an infinite part makes no NaN
        in the other, as in NumPy's sum; scipy's row sums agree, its column
        sums do not).
        """
        axis = _check_axis(axis)
        if out is not None:
            return _into(out, self.sum(axis, dtype), self._xp())
        dtype = _sum_dtype(self.dtype) if dtype is None else check_dtype(dtype)
        xp = self._xp()
        if axis is None:
            if self.dtype == np.bool_:
                total = self._block_source().offsets[-1].astype(dtype)
            else:
                total = self._block_source().values.sum(dtype=dtype)
            return total[()] if xp is np else total
        if dtype.kind == "c":
            # by parts: a product with complex ones makes inf * 0 = nan in
            # the other part, where NumPy's sum of inf+0j is inf+0j
            real = np.empty(0, dtype).real.dtype
            sums = self.real.sum(axis, real).astype(dtype)
            sums.imag = self.imag.sum(axis, real)
            return sums
        # as scipy, in the default accumulator (int64 for integers) or wider:
        # int32 ones made int32 sums, whose wrapping to 0 turned a nonzero
        # sum into False for dtype=bool
        ones = np.promote_types(_sum_dtype(self.dtype), dtype)
        if axis == 1:
            sums = self @ xp.ones(self.shape[1], dtype=ones)
        else:
            sums = self.__rmatmul__(xp.ones(self.shape[0], dtype=ones))
        return sums.astype(dtype, copy=False)

    def mean(self, axis: int | None = None, dtype: Any = None, out: Any = None) -> Any:
        """Mean of all entries, or of each column (``axis=0``) or row (``axis=1``).

        As scipy: bool and integer matrices average in float64, the others in
        their own dtype, and the result is cast to ``dtype`` when given (or
        written into ``out``, see :meth:`sum`, which then decides the dtype).
        The values are scaled before they are summed, so a large sum does not
        overflow first. The mean of no entries is nan, as NumPy's (scipy
        raises ZeroDivisionError).

        Returns
        -------
        scalar or 1-D array
            As :meth:`sum` returns them.
        """
        axis = _check_axis(axis)
        inner = np.dtype(np.float64) if self.dtype.kind in "biu" else self.dtype
        m = self.astype(inner, copy=False)
        count = self.shape[0] * self.shape[1] if axis is None else self.shape[axis]
        mean = m._scale(1.0 / count).sum(axis=axis, dtype=inner) if count \
            else m.sum(axis=axis, dtype=inner) * np.nan
        if out is not None:
            # (as scipy: the mean in its own dtype, cast by the write)
            return _into(out, mean, self._xp())
        return mean if dtype is None else mean.astype(check_dtype(dtype), copy=False)

    def max(self, axis: int | None = None, out: None = None, *,
            explicit: bool = False) -> Any:
        """Largest entry, or of each column (``axis=0``) or row (``axis=1``).

        As scipy: entries not stored are zeros and take part wherever a
        column or row has any, unless ``explicit``; NaN propagates. ``out``
        is there for NumPy's ``numpy.max(A)``, which passes None; as in
        scipy, nothing else is taken (ValueError).

        Returns
        -------
        scalar or 1-D array
            In the matrix's dtype: a NumPy scalar on the host (a 0-d CuPy
            array on the GPU, without a sync); per column or row, a dense
            1-D array (scipy returns a 1-D ``coo_array``).

        Raises
        ------
        ValueError
            ``axis`` is not None, 0, 1, -2 or -1, the reduced axis is empty,
            or ``out`` is not None.
        """
        _no_out(out, "max")
        return _extremes.extreme(self, _check_axis(axis), True, explicit)

    def min(self, axis: int | None = None, out: None = None, *,
            explicit: bool = False) -> Any:
        """Smallest entry, or of each column (``axis=0``) or row (``axis=1``);
        see :meth:`max`."""
        _no_out(out, "min")
        return _extremes.extreme(self, _check_axis(axis), False, explicit)

    def nanmax(self, axis: int | None = None, out: None = None, *,
               explicit: bool = False) -> Any:
        """Largest entry skipping NaN (``numpy.fmax``), or of each column or
        row; see :meth:`max`. A line of only NaNs gives NaN, or 0 where it
        misses an entry (and not ``explicit``), as scipy's."""
        _no_out(out, "nanmax")
        return _extremes.extreme(self, _check_axis(axis), True, explicit, skip_nan=True)

    def nanmin(self, axis: int | None = None, out: None = None, *,
               explicit: bool = False) -> Any:
        """Smallest entry skipping NaN, or of each column or row; see :meth:`nanmax`."""
        _no_out(out, "nanmin")
        return _extremes.extreme(self, _check_axis(axis), False, explicit, skip_nan=True)

    def argmax(self, axis: int | None = None, out: None = None, *,
               explicit: bool = False) -> Any:
        """Index of the largest entry (flat, row-major), or of each column's
        (``axis=0``) or row's (``axis=1``), as scipy's.

        Entries not stored are zeros, unless ``explicit``; ties go to the
        first index. NaN is the largest wherever a line holds one, as in
        ``numpy.argmax`` (scipy's picks a missing zero over it where the line
        misses one). ``out`` must be None, as for :meth:`max`.

        Returns
        -------
        int or 1-D int64 array
            For ``axis=None`` the flat index ``i * n + j``: a Python int on
            the host (a 0-d CuPy array on the GPU, without a sync); per column
            or row, the row or column indices (length n or m; 0 for a line
            with nothing stored when ``explicit``), in the matrix's library.
            With ``explicit`` and ``axis=None`` this is the flat index of the
            stored entry (scipy 1.17 returns its place among the stored
            entries instead).

        Raises
        ------
        ValueError
            ``axis`` is not None, 0, 1, -2 or -1; the matrix (``axis=None``)
            or the reduced axis is empty; nothing is stored, with
            ``explicit`` and ``axis=None``; or ``out`` is not None.

        Notes
        -----
        Two stable argsorts of the stored values, two scans and a binary
        search per line; ``axis=0`` transposes the matrix first.
        """
        _no_out(out, "argmax")
        return _extremes.arg_extreme(self, _check_axis(axis), True, explicit)

    def argmin(self, axis: int | None = None, out: None = None, *,
               explicit: bool = False) -> Any:
        """Index of the smallest entry, or of each column's or row's; see
        :meth:`argmax` (NaN is the smallest wherever a line holds one)."""
        _no_out(out, "argmin")
        return _extremes.arg_extreme(self, _check_axis(axis), False, explicit)

    def trace(self, offset: int = 0) -> Any:
        """Sum of the ``offset``-th diagonal (see :meth:`diagonal`), as NumPy sums it.

        A diagonal longer than the blocks could hold (a hypersparse matrix's,
        which could take more memory than there is) is not built: the stored
        entries on it are summed instead, in the dtype NumPy's sum gives.

        Raises
        ------
        TypeError
            ``offset`` is not an integer.
        """
        offset = operator_index(offset, "offset")
        m, n = self.shape
        length = max(min(m + min(offset, 0), n - max(offset, 0)), 0)
        if length <= self.nblocks * BLOCK * BLOCK:
            return self.diagonal(offset).sum()
        # the diagonal's missing entries are zeros, which add nothing; the
        # stored entries off it become zeros too, so that the sum has the
        # dtype NumPy's sum of the diagonal has (int64 for bool and int32)
        xp = self._xp()
        rows, cols = self._coo_indices()
        values = self._data()
        total = xp.where(cols - rows == offset, values, xp.zeros((), dtype=values.dtype)).sum()
        return total[()] if xp is np else total

    def count_nonzero(self, axis: int | None = None) -> Any:
        """Number of entries that are not zero (stored zeros are not counted), as scipy.

        Parameters
        ----------
        axis : {None, 0, 1, -2, -1}

        Returns
        -------
        int or 1-D int64 array
            An int on the host (a 0-d CuPy array on the GPU, without a sync)
            for ``axis=None``; per column (0) or row (1) counts otherwise.

        Raises
        ------
        ValueError
            ``axis`` is not one of the above.
        """
        axis = _check_axis(axis)
        if self.dtype == np.bool_:
            ones = self
        else:
            ones = BitmapMatrix._from_blocks(self.keys, self.bitmaps, self.offsets,
                                             (self.values != 0).astype(np.int64), self.shape)
        total = ones.sum(axis=axis, dtype=np.int64)
        return int(total) if axis is None and not self.on_device else total

    def diagonal(self, k: int = 0) -> Any:
        """The k-th diagonal (zeros where nothing is stored), as scipy returns it.

        Parameters
        ----------
        k : int
            0 the main diagonal, above it for k > 0, below for k < 0.

        Returns
        -------
        1-D array
            Of length ``min(m + min(k, 0), n - max(k, 0))`` (0 when k is
            outside the matrix), in the matrix's library and dtype.

        Notes
        -----
        A binary search of the keys per diagonal element (``_indexing``'s
        lookup of elements); no sync.
        """
        from ._indexing import lookup

        k = operator_index(k, "k")
        m, n = self.shape
        xp = self._xp()
        length = max(min(m + min(k, 0), n - max(k, 0)), 0)
        if length == 0:  # also a k beyond int64, as scipy allows
            return xp.zeros(0, dtype=self.dtype)
        rows = xp.arange(length, dtype=xp.int64) + max(-k, 0)
        values, present = lookup(self, xp, rows, rows + k)
        return present if values is None else values


def _check_blocks(xp: Any, m: BitmapMatrix) -> None:
    """The invariants that need a scan of the arrays (one sync on the GPU)."""
    from ._format import block_cols_of, block_rows_of

    nbr, nbc = nblocks_along(m.shape[0]), nblocks_along(m.shape[1])
    keys = m.keys
    rows, cols = block_rows_of(keys), block_cols_of(keys)
    increasing = keys[1:] > keys[:-1]
    row_ok = rows < nbr
    col_ok = cols < nbc
    nonempty = m.bitmaps != 0
    counts = popcount(m.bitmaps)
    # padding bits of the last block row and column must be zero
    pad_rows = (rows == nbr - 1) * (nbr * BLOCK - m.shape[0])
    pad_cols = (cols == nbc - 1) * (nbc * BLOCK - m.shape[1])
    flags = [increasing.all(), row_ok.all(), col_ok.all(), nonempty.all(),
             (m.offsets[1:] - m.offsets[:-1] == counts).all(), m.offsets[0] == 0,
             _padding_clear(xp, m.bitmaps, pad_rows, pad_cols).all()]
    if m.values is not None:
        flags.append(m.offsets[-1] == m.values.shape[0])
    elif m._nnz is not None:
        flags.append(m.offsets[-1] == m._nnz)
    ok = [bool(f) for f in xp.stack(flags).tolist()]  # sync: all checks in one read
    messages = [
        "keys must be strictly increasing",
        f"key block row out of range for shape {m.shape}",
        f"key block column out of range for shape {m.shape}",
        "bitmaps must not be empty (0)",
        "offsets must be the exclusive scan of popcount(bitmaps)",
        "offsets[0] must be 0",
        f"bitmaps have bits outside the shape {m.shape}",
        "offsets[-1] must equal the number of values" if m.values is not None
        else "offsets[-1] must equal nnz",
    ]
    for good, message in zip(ok, messages):
        if not good:
            raise ValueError(message)


def _padding_clear(xp: Any, bitmaps: Any, pad_rows: Any, pad_cols: Any) -> Any:
    """True where no bit lies in the padded rows or columns of a block."""
    full = xp.uint64(0xFFFFFFFFFFFFFFFF)
    # rows 8 - pad_rows .. 7 are the top bytes; columns 8 - pad_cols .. 7 the top bits of each byte
    row_mask = xp.where(pad_rows > 0, full << (xp.uint64(64) - (pad_rows * 8).astype(xp.uint64)),
                        xp.uint64(0))
    col_byte = xp.where(pad_cols > 0, (xp.uint64(0xFF) << (xp.uint64(8) - pad_cols.astype(
        xp.uint64))) & xp.uint64(0xFF), xp.uint64(0))
    col_mask = col_byte * xp.uint64(0x0101010101010101)
    return (bitmaps & (row_mask | col_mask)) == 0


def _check_axis(axis: Any) -> int | None:
    """None, 0 or 1 of a reduction's ``axis``: None, 0, 1, -2, -1, or a tuple
    of them as scipy's sparse arrays take it (both axes: None)."""
    if axis is None:
        return None
    if isinstance(axis, tuple) and axis:
        axes = [_check_axis(a) if not isinstance(a, tuple) else _bad_axis(axis) for a in axis]
        if None in axes or len(set(axes)) != len(axes):
            raise ValueError(f"axis must name each of 0 and 1 at most once, got {axis!r}")
        return axes[0] if len(axes) == 1 else None
    if isinstance(axis, (int, np.integer)) and not isinstance(axis, bool) and -2 <= axis <= 1:
        return int(axis) % 2
    return _bad_axis(axis)


def _bad_axis(axis: Any) -> NoReturn:
    raise ValueError(f"axis must be None, 0, 1, -2 or -1, or a tuple of them, got {axis!r}")


def _into(out: Any, result: Any, xp: Any) -> Any:
    """``result`` (a scalar or array of ``xp``) written into ``out``, cast
    to its dtype, and ``out`` returned: scipy's ``out`` of sum and mean."""
    _check_out(out, xp)
    shape = tuple(getattr(result, "shape", ()))
    if tuple(out.shape) != shape:
        raise ValueError(f"out has shape {tuple(out.shape)}; the result's is {shape}")
    out[...] = result
    return out


def _check_out(out: Any, xp: Any) -> None:
    """TypeError unless ``out`` is an array of ``xp`` (the matrix's library)."""
    if not _is_array(out):
        raise TypeError(f"out must be an array, got {type(out).__name__}")
    if get_array_module(out) is not xp:
        raise TypeError("out must be in the matrix's library: a NumPy array for a matrix on "
                        "the host, a CuPy array for one on the GPU")


def _no_out(out: Any, name: str) -> None:
    """scipy's refusal of an ``out`` for min, max, argmin and argmax (the
    argument is there for NumPy's functions, which pass None)."""
    if out is not None:
        raise ValueError(f"sparse {name} does not support an 'out' parameter; use "
                         f"numpy.copyto(out, A.{name}(...)) instead")


def _sum_dtype(dtype: np.dtype) -> np.dtype:
    """scipy's dtype of a sum: int64 for bool and integers, else the dtype itself."""
    return np.dtype(np.int64) if dtype.kind in "biu" else dtype


def _is_scalar(x: Any) -> bool:
    """A Python or NumPy number (bool included), or a NumPy 0-d numeric array."""
    if isinstance(x, np.ndarray):
        return x.ndim == 0 and x.dtype.kind in "biufc"
    return isinstance(x, (numbers.Number, np.bool_))


def _is_dense(x: Any) -> bool:
    """A NumPy or CuPy array (not a NumPy 0-d array, which counts as a scalar)."""
    if isinstance(x, np.ndarray):
        return x.ndim > 0
    return type(x).__module__.startswith("cupy") and type(x).__name__ == "ndarray"


def _as_operand(x: Any) -> Any:
    """An operand as the operators take it: a NumPy array for a list or a
    tuple (as scipy takes them), a plain ndarray for an ndarray subclass
    (``numpy.matrix`` keeps two dimensions where a kernel takes one), else
    ``x`` itself."""
    kind = type(x)
    if kind is np.ndarray or kind is BitmapMatrix:
        return x
    if kind is list or kind is tuple or isinstance(x, np.ndarray):
        return np.asarray(x)
    return x


def _is_matrix_product(x: Any) -> bool:
    """True for a sparse operand whose ``*`` is the matrix product: a scipy
    ``*_matrix`` (not a sparse array) or any cupyx sparse matrix."""
    if _is_cupyx_sparse(x):
        return True
    if not _is_scipy_sparse(x):
        return False
    import scipy.sparse as sp

    return not isinstance(x, sp.sparray)


def _as_sparse(x: Any) -> BitmapMatrix | None:
    """``x`` as a BitmapMatrix when it is one or a scipy/cupyx sparse matrix, else None."""
    if isinstance(x, BitmapMatrix):
        return x
    if _is_scipy_sparse(x) or _is_cupyx_sparse(x):
        return BitmapMatrix(x)
    return None


def _contiguous(x: Any) -> Any:
    return get_array_module(x).ascontiguousarray(x)


def _reshape_target(args: tuple[Any, ...], current: tuple[int, int]) -> tuple[int, int]:
    """``reshape``'s arguments (a shape, or its dimensions) as the new shape,
    a negative dimension taking what is left, as scipy's; ValueError, with
    NumPy's and scipy's words, where none fits."""
    shape = args[0] if len(args) == 1 and not isinstance(args[0], numbers.Integral) else args
    try:
        dims = [operator_index(d, "a dimension") for d in shape]
    except TypeError:
        raise TypeError(f"shape must be a tuple of integers, got {shape!r}") from None
    if len(dims) != 2:
        raise ValueError(f"a BitmapMatrix is 2-D: cannot reshape it to {len(dims)} "
                         "dimensions")
    size = current[0] * current[1]
    unknown = [i for i, d in enumerate(dims) if d < 0]
    if len(unknown) > 1:
        raise ValueError("can only specify one unknown dimension")
    if unknown:
        known = dims[1 - unknown[0]]
        if known and not size % known:
            dims[unknown[0]] = size // known
    if min(dims) < 0 or dims[0] * dims[1] != size:
        raise ValueError(f"cannot reshape array of size {size} into shape {tuple(shape)}")
    return check_shape(dims)


def _check_not_0d(name: str, x: Any) -> None:
    """ValueError for a scalar or 0-d array ``x`` given as the 1-D array
    ``name``: ``ascontiguousarray`` would make it 1-D, and the
    conversion's check of the rank would then take it as one entry, the
    shape inference fail on it obscurely (scipy refuses it)."""
    if getattr(x, "ndim", 1) == 0 or isinstance(x, numbers.Number):
        raise ValueError(f"{name} must be 1-D, got 0-D")


def _to_xp(x: Any, device: bool) -> Any:
    if not device:
        return x
    return gpu_module("from_scipy(device=True)").asarray(x)


def _is_integer(x: Any) -> bool:
    """A Python or NumPy integer (not a bool): a dimension of scipy's (M, N)."""
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _cast_input(values: Any, dtype: Any, *indices: Any) -> Any:
    """The values of triplets or CSR arrays cast to ``dtype`` first (in the
    array module of ``indices``), as scipy casts its input given a dtype:
    duplicates are then summed in ``dtype`` (0.5 + 0.5 is 0 in int, 1 + -1
    is True in bool), and a dtype no matrix stores (int8, float16, ...) is
    never met."""
    if dtype is None or values is None:
        return values
    xp = get_array_module(*(x for x in (values, *indices) if _is_array(x)))
    if not _is_array(values):
        # a list is built in dtype, as scipy builds it: complex numbers in a
        # real dtype are a TypeError, not a cast that drops their imaginary parts
        return xp.asarray(values, dtype=check_dtype(dtype))
    return xp.asarray(values).astype(check_dtype(dtype), copy=False)


def _inferred_shape(rows: Any, cols: Any, form: str = "COO",
                    names: tuple[str, str] = ("rows", "cols")) -> tuple[int, int]:
    """scipy's shape of triplets given without one: one past the largest
    index of each (one sync on the GPU)."""
    for name, x in zip(names, (rows, cols)):
        _check_not_0d(name, x)
    sizes = [len(x) if isinstance(x, (list, tuple)) else x.shape[0] for x in (rows, cols)]
    if not all(sizes):
        raise ValueError(f"cannot infer the shape of {form} arrays without entries: "
                         f"pass shape=")
    xp = get_array_module(*(x for x in (rows, cols) if _is_array(x)))
    # (a CSR triple's columns are its indices for both: one reduction)
    arrays = [xp.asarray(rows)] if rows is cols else [xp.asarray(rows), xp.asarray(cols)]
    for x in arrays:
        # (before max(): NumPy's own error for strings names no argument)
        if x.dtype.kind not in "iu":
            raise TypeError(f"the index arrays of {form} input must be integer arrays, got "
                            f"{x.dtype.name}")
    # sync: the largest indices in one read
    largest = [int(x) + 1 for x in xp.stack([x.max() for x in arrays]).tolist()]
    return largest[0], largest[-1]


def _is_array(x: Any) -> bool:
    return isinstance(x, np.ndarray) or hasattr(x, "__cuda_array_interface__")


def _is_scipy_sparse(a: Any) -> bool:
    try:
        import scipy.sparse as sp
    except ImportError:  # pragma: no cover - scipy is a dependency
        return False
    return sp.issparse(a)


def _is_cupyx_sparse(a: Any) -> bool:
    mod = type(a).__module__
    if not mod.startswith("cupyx"):
        return False
    import cupyx.scipy.sparse as csp

    return csp.issparse(a)


def _compare(a: BitmapMatrix, other: Any, op: str) -> Any:
    from ._compare import compare

    return compare(a, other, op)
