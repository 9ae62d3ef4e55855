// spmv_dense.cu - the kernels of spmv.cu for matrices of dense blocks: step 1
// by dense_block_partials (spmv.cuh), each block's partial sums in registers,
// row by row; the same sums in the same order as spmv.cu's kernels, which
// spmv.py launches for matrices of fewer entries per block.
//
// Arguments, launch, work and order: as spmv.cu's kernels of the same names
// without _dense, with no dynamic shared memory.
#include "spmv.cuh"

BMSPARSE_SPMV_KERNEL(bmsparse_spmv_rows_dense, false, true)
BMSPARSE_SPMV_UNIT_KERNEL(bmsparse_spmv_rows_unit_dense, false, true)
BMSPARSE_SPMV_KERNEL(bmsparse_spmv_cols_dense, true, true)
BMSPARSE_SPMV_UNIT_KERNEL(bmsparse_spmv_cols_unit_dense, true, true)
