// semiring.cuh - one functor per semiring of bmsparse/semiring.py.
//
// An accumulator starts at S::identity<T>() and takes every term of its
// output entry, in the kernel's fixed order, as
//     acc = S::add(acc, S::mul(a, b))
// S::reads_values is false for the PAIR operator, whose term is 1 whatever
// the values (kernels then never read A's or B's values). The structure of
// the output is exact before any value is computed, so an identity (an
// infinity for min_plus) is never stored.
#pragma once

// the extreme values of each numeric T, without <limits>
template <typename T> struct bm_limits;
template <> struct bm_limits<int> {
    static __device__ __forceinline__ int max() { return 2147483647; }
    static __device__ __forceinline__ int lowest() { return -2147483647 - 1; }
};
template <> struct bm_limits<long long> {
    static __device__ __forceinline__ long long max() { return 9223372036854775807LL; }
    static __device__ __forceinline__ long long lowest() { return -9223372036854775807LL - 1; }
};
template <> struct bm_limits<float> {
    static __device__ __forceinline__ float max() { return __int_as_float(0x7f800000); }
    static __device__ __forceinline__ float lowest() { return __int_as_float((int)0xff800000u); }
};
template <> struct bm_limits<double> {
    static __device__ __forceinline__ double max() { return __longlong_as_double(0x7ff0000000000000LL); }
    static __device__ __forceinline__ double lowest() {
        return __longlong_as_double((long long)0xfff0000000000000ull);
    }
};

// NaN propagates as in NumPy's minimum and maximum: a NaN term wins
template <typename T>
__device__ __forceinline__ T bm_min(T a, T b) { return (b < a || b != b) ? b : a; }
template <typename T>
__device__ __forceinline__ T bm_max(T a, T b) { return (b > a || b != b) ? b : a; }

struct PlusTimes {
    static constexpr bool reads_values = true;
    template <typename T> static __device__ __forceinline__ T identity() { return T(0); }
    template <typename T> static __device__ __forceinline__ T add(T a, T b) { return a + b; }
    template <typename T> static __device__ __forceinline__ T mul(T a, T b) { return a * b; }
};

struct MinPlus {
    static constexpr bool reads_values = true;
    template <typename T> static __device__ __forceinline__ T identity() { return bm_limits<T>::max(); }
    template <typename T> static __device__ __forceinline__ T add(T a, T b) { return bm_min(a, b); }
    template <typename T> static __device__ __forceinline__ T mul(T a, T b) { return a + b; }
};

struct MaxPlus {
    static constexpr bool reads_values = true;
    template <typename T> static __device__ __forceinline__ T identity() { return bm_limits<T>::lowest(); }
    template <typename T> static __device__ __forceinline__ T add(T a, T b) { return bm_max(a, b); }
    template <typename T> static __device__ __forceinline__ T mul(T a, T b) { return a + b; }
};

struct MaxTimes {
    static constexpr bool reads_values = true;
    template <typename T> static __device__ __forceinline__ T identity() { return bm_limits<T>::lowest(); }
    template <typename T> static __device__ __forceinline__ T add(T a, T b) { return bm_max(a, b); }
    template <typename T> static __device__ __forceinline__ T mul(T a, T b) { return a * b; }
};

struct PlusPair {
    static constexpr bool reads_values = false;
    template <typename T> static __device__ __forceinline__ T identity() { return T(0); }
    template <typename T> static __device__ __forceinline__ T add(T a, T b) { return a + b; }
    template <typename T> static __device__ __forceinline__ T mul(T, T) { return T(1); }
};
