// group.cuh - reductions over groups of lanes that walk in step.
//
// group_reduce<G>(v, op): op folded over the G lanes of this lane's group
// (G a power of two up to 32, groups at lanes 0, G, 2G, ...; 32: the whole
// warp), every lane getting the result. Butterfly shuffles with the whole
// warp's mask: every lane of the warp calls it at once, so kernels built on
// it keep a warp's groups in step (a group done goes round with nothing to
// do) and the warp converged at each call. A collective with a group's mask
// in a warp whose groups went separate ways (__reduce_min_sync(group, ...)
// in a loop each group runs its own number of times) runs the compiler's
// emulation instead (WARPSYNC.COLLECTIVE, a pass per group): about a third
// of the row merge's stall samples on 3d-7pt, a quarter of the CSR walks'
// on the surrogate (ncu, H200). In step the row merge ran 11% faster on
// 3d-7pt, the walks 4% on the surrogate and 13-24% on musae_git and
// luxembourg_osm (benchmarks/NOTES.md, sessions 31 and 32).
#pragma once

#define BMSPARSE_FULL_WARP 0xffffffffu

template <int G, typename V, typename F>
__device__ __forceinline__ V group_reduce(V v, F op)
{
    static_assert(G > 1 && G <= 32 && (G & (G - 1)) == 0, "groups of 2 to 32 lanes");
#pragma unroll
    for (int d = G / 2; d > 0; d >>= 1) v = op(v, __shfl_xor_sync(BMSPARSE_FULL_WARP, v, d, G));
    return v;
}
