// _primitives.cu - primitives CuPy lacks or makes slow.
//
// bmsparse_scan: an inclusive or exclusive scan of int64 in one launch, for
// any length. CuPy's cumsum takes several launches (about 45 us of host time
// for 20,000 elements on an H200), and a scan by one thread block walking
// tile after tile took 30-46 us for 40,000 elements: one memory latency per
// tile. Here every tile has its own thread block and they run at once (a
// decoupled look-back: _cuda/scan.cuh).
//   long long in[n]                   - values
//   long long n
//   long long out[n + shift]          - out: the scan; with shift 0 inclusive
//                                       (may alias in: a tile reads its own
//                                       elements only, before writing them),
//                                       with shift 1 exclusive (out[0] = 0)
//   long long state[1 + 3 * ntiles]   - zeroed (_cuda/scan.cuh)
//   long long ntiles                  - ceil(n / BMSPARSE_SCAN_TILE)
//   long long shift                   - 0 or 1
//   long long report[n / every]       - out, when every > 0: report[k - 1] =
//                                       the sum of in[0, k * every), so the
//                                       host learns a few totals without
//                                       reading `out` (it may be page-locked
//                                       host memory: see _readback.py)
//   long long every
// Launch: ntiles blocks of BMSPARSE_SCAN_THREADS threads.
// Work: O(n), one read and one write of each element. Deterministic
// (integers: the association order does not change the sums).
//
// bmsparse_scan_bytes: the exclusive scan of small counts held in bytes (the
// row segments' lengths of bitmap -> CSR, at most 8 each) into I, int32 when
// the total fits: 1 + 4 bytes an item move instead of 8 + 8. A thread owns
// 32 consecutive counts, loaded as two 16-byte words and written as 16-byte
// words, so a tile is 8,192 items (a quarter of the tiles of bmsparse_scan,
// whose time goes to each tile's latency, not to bandwidth).
//   unsigned char in[n]               - counts (16-byte aligned)
//   long long n
//   I         out[n + 1]              - out: out[i] = sum of in[0, i)
//   long long state[1 + 3 * ntiles]   - zeroed (_cuda/scan.cuh)
//   long long ntiles                  - ceil(n / BMSPARSE_BYTE_TILE)
// Launch: ntiles blocks of BMSPARSE_SCAN_THREADS threads.
//
// bmsparse_sort_segment_chunks: sorts uint64 codes whose segments (runs of
// codes already ordered against each other, such as the tasks of one block
// row) are short, in shared memory, one thread block per chunk of segments.
//
// bmsparse_copy_runs: runs of values one after another (a gather of whole
// runs: a block's values move with it).
//   long long starts[n], counts[n]    - the runs: values[starts[p] ..
//                                       starts[p] + counts[p])
//   long long dest[n]                 - where each goes in `out` (the
//                                       exclusive scan of counts)
//   long long n
//   T         values[...], out[...]   - out: the runs
// Launch: one thread per run. Work: O(n + the values moved).
//
// bmsparse_merge_pieces: blocks from pieces of blocks sorted by key, the
// pieces of one key with disjoint bits (rows or columns of one block taken
// from several places): at the first piece of each key, the union of its
// pieces' bitmaps and whether it has bits.
//   u64       keys[n], bitmaps[n]     - the pieces (uint64)
//   long long n
//   u64       unions[n]               - out: the union, at a key's first piece
//   unsigned char heads[n]            - out: 1 at a key's first piece whose
//                                       union has bits, else 0
// Launch: one thread per piece. Work: O(n); a key's pieces are few (at most
// 8 with bits: each holds a row or more), read by its first piece's thread.
// Deterministic: no atomics.
// bitmap.cuh: bm_complex, for bmsparse_copy_runs
#include "_cuda/bitmap.cuh"
#include "_cuda/scan.cuh"

extern "C" __global__ void __launch_bounds__(BMSPARSE_SCAN_THREADS)
bmsparse_scan(const long long* in, long long n, long long* out, long long* state,
              long long ntiles, long long shift, long long* report, long long every)
{
    __shared__ long long items[BMSPARSE_SCAN_SLOTS];
    const long long tile = scan_ticket(state);
    const long long base = tile * BMSPARSE_SCAN_TILE;
    // coalesced loads through shared memory; thread t then owns ITEMS
    // consecutive elements
#pragma unroll
    for (int k = 0; k < BMSPARSE_SCAN_ITEMS; ++k) {
        const long long i = base + k * BMSPARSE_SCAN_THREADS + threadIdx.x;
        items[scan_slot(k * BMSPARSE_SCAN_THREADS + threadIdx.x)] = i < n ? in[i] : 0;
    }
    // this thread's elements are [first, first + ITEMS): one division finds
    // the first of them that ends a reported range
    const long long first = base + threadIdx.x * BMSPARSE_SCAN_ITEMS;
    long long reported = every > 0 ? (first / every + 1) * every - 1 : -1;
    scan_tile_items(items, tile, ntiles, state, [&](int k, long long running) {
        if (first + k == reported && reported < n) {
            report[reported / every] = running;
            reported += every;
        }
    });
    if (shift && tile == 0 && threadIdx.x == 0) out[0] = 0;
#pragma unroll
    for (int k = 0; k < BMSPARSE_SCAN_ITEMS; ++k) {
        const long long i = base + k * BMSPARSE_SCAN_THREADS + threadIdx.x;
        if (i < n) out[i + shift] = items[scan_slot(k * BMSPARSE_SCAN_THREADS + threadIdx.x)];
    }
}

#define BMSPARSE_BYTE_ITEMS 32
#define BMSPARSE_BYTE_TILE (BMSPARSE_SCAN_THREADS * BMSPARSE_BYTE_ITEMS)

// 16 bytes of out holding 16 / sizeof(I) consecutive values of `running`
// from item k on (v: the counts)
template <typename I>
__device__ __forceinline__ void store_running(I* out, const unsigned char* v, int k,
                                              long long& running);

template <>
__device__ __forceinline__ void store_running<int>(int* out, const unsigned char* v, int k,
                                                   long long& running) {
    int4 w;
    w.x = (int)running; running += v[k];
    w.y = (int)running; running += v[k + 1];
    w.z = (int)running; running += v[k + 2];
    w.w = (int)running; running += v[k + 3];
    *reinterpret_cast<int4*>(out + k) = w;
}

template <>
__device__ __forceinline__ void store_running<long long>(long long* out, const unsigned char* v,
                                                         int k, long long& running) {
    longlong2 w;
    w.x = running; running += v[k];
    w.y = running; running += v[k + 1];
    *reinterpret_cast<longlong2*>(out + k) = w;
}

template <typename I>
__global__ void __launch_bounds__(BMSPARSE_SCAN_THREADS)
bmsparse_scan_bytes(const unsigned char* in, long long n, I* out, long long* state,
                    long long ntiles)
{
    const long long tile = scan_ticket(state);
    const long long first = (tile * BMSPARSE_SCAN_THREADS + threadIdx.x) * BMSPARSE_BYTE_ITEMS;
    const bool whole = first + BMSPARSE_BYTE_ITEMS <= n;
    alignas(16) unsigned char v[BMSPARSE_BYTE_ITEMS];
    if (whole) {
        const uint4* words = reinterpret_cast<const uint4*>(in + first);
        *reinterpret_cast<uint4*>(v) = words[0];
        *reinterpret_cast<uint4*>(v + 16) = words[1];
    } else {
#pragma unroll
        for (int k = 0; k < BMSPARSE_BYTE_ITEMS; ++k) v[k] = first + k < n ? in[first + k] : 0;
    }
    int sum = 0;
#pragma unroll
    for (int k = 0; k < BMSPARSE_BYTE_ITEMS; ++k) sum += v[k];
    long long running = scan_thread_prefix(sum, tile, ntiles, state).thread;
    if (whole) {
#pragma unroll
        for (int k = 0; k < BMSPARSE_BYTE_ITEMS; k += 16 / (int)sizeof(I))
            store_running(out + first, v, k, running);
    } else {
#pragma unroll
        for (int k = 0; k < BMSPARSE_BYTE_ITEMS; ++k) {
            if (first + k < n) out[first + k] = (I)running;
            running += v[k];  // zero past n
        }
    }
    // the total after the last item: the thread holding it
    if (first < n && n <= first + BMSPARSE_BYTE_ITEMS) out[n] = (I)running;
}

#ifndef BMSPARSE_SORT_THREADS
#define BMSPARSE_SORT_THREADS 256
#endif

// first segment start >= t, or n: segment starts are non-decreasing (clamped
// to [t, n], so that malformed starts, which the caller reports, stay in bounds)
__device__ __forceinline__ long long segment_at_or_after(
    const long long* seg_starts, long long nseg, long long t, long long n) {
    if (t >= n) return n;
    long long lo = 0, hi = nseg;
    while (lo < hi) {
        const long long mid = (lo + hi) >> 1;
        if (seg_starts[mid] < t) lo = mid + 1; else hi = mid;
    }
    const long long start = lo < nseg ? seg_starts[lo] : n;
    return start < t ? t : start > n ? n : start;
}

// Sort chunks of whole segments of codes, each in shared memory.
//   u64       codes[n]          - in/out; codes of different segments must already be
//                                 in order (only the codes inside a segment move)
//   long long chunk             - a chunk holds the segments that start inside its
//                                 `chunk` codes: up to 2 * chunk (the dynamic shared
//                                 memory given) when no segment is longer than chunk
//   long long seg_starts[nseg]  - first code of every segment, non-decreasing
//   char      in_long[n]        - out: 1 for the codes of a chunk too long to sort
//                                 here (left to a global sort), else 0
// Launch: one thread block of BMSPARSE_SORT_THREADS threads per chunk.
// Work: bitonic sort, O(L log^2 L) for a chunk of L codes.
extern "C" __global__ void __launch_bounds__(BMSPARSE_SORT_THREADS)
bmsparse_sort_segment_chunks(
    unsigned long long* __restrict__ codes, long long n, long long chunk,
    const long long* __restrict__ seg_starts, long long nseg, char* __restrict__ in_long)
{
    extern __shared__ unsigned long long tile[];
    const long long k = blockIdx.x;
    const long long lo = segment_at_or_after(seg_starts, nseg, k * chunk, n);
    const long long hi = segment_at_or_after(seg_starts, nseg, (k + 1) * chunk, n);
    const long long len = hi > lo ? hi - lo : 0;
    const char is_long = len > 2 * chunk;
    for (long long s = lo + threadIdx.x; s < hi; s += blockDim.x) in_long[s] = is_long;
    if (len <= 1 || is_long) return;
    int size = 2;
    while (size < len) size <<= 1;
    for (int s = threadIdx.x; s < size; s += blockDim.x) tile[s] = s < len ? codes[lo + s] : ~0ull;
    __syncthreads();
    for (int width = 2; width <= size; width <<= 1) {
        for (int stride = width >> 1; stride > 0; stride >>= 1) {
            for (int s = threadIdx.x; s < size; s += blockDim.x) {
                const int partner = s ^ stride;
                if (partner > s) {
                    const unsigned long long x = tile[s], y = tile[partner];
                    const bool ascending = (s & width) == 0;
                    if ((x > y) == ascending) { tile[s] = y; tile[partner] = x; }
                }
            }
            __syncthreads();
        }
    }
    for (int s = threadIdx.x; s < len; s += blockDim.x) codes[lo + s] = tile[s];
}

template <typename T>
__global__ void bmsparse_copy_runs(const long long* __restrict__ starts,
                                   const long long* __restrict__ counts,
                                   const long long* __restrict__ dest, long long n,
                                   const T* __restrict__ values, T* __restrict__ out)
{
    const long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (p >= n) return;
    const T* from = values + starts[p];
    T* to = out + dest[p];
    for (long long i = 0, count = counts[p]; i < count; ++i) to[i] = from[i];
}

extern "C" __global__ void bmsparse_merge_pieces(
    const u64* __restrict__ keys, const u64* __restrict__ bitmaps,
    long long n, u64* __restrict__ unions, unsigned char* __restrict__ heads)
{
    const long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (p >= n) return;
    const u64 key = keys[p];
    if (p > 0 && keys[p - 1] == key) {
        heads[p] = 0;
        return;
    }
    u64 all = 0;
    for (long long q = p; q < n && keys[q] == key; ++q) all |= bitmaps[q];
    unions[p] = all;
    heads[p] = all != 0;
}
