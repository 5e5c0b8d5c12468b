/* The Freivalds check's per-call O(n) work in one call each (optional, compiled at
 * install time; kcontract.freivalds._screen falls back to numpy when it is missing).
 *
 * After a large product has streamed through the caches every small numpy call costs
 * several microseconds, and the check made a dozen of them beside its three
 * matrix-vector products; these functions do the same arithmetic in one pass:
 *
 *   signs(seed_lo, seed_hi, stream, n, out, kind) -> sum
 *       the check's balanced +-1 signs of (seed, stream) into out (kind 0: float32,
 *       1: float64, 2: int8), as kcontract.freivalds._screen.signs defines them.
 *   screen_stats(z, w, kz, buf, k, k9, cblk, kc, ablk, ka, y, ky, rows)
 *       -> (max |d|, d_(k), d_(k9), sum c^2, sum a^2, sum y^2)
 *       (rows > 0: cblk and ablk hold that many rows, and the sums are of the largest row)
 *       d = |z - w| (w None: |z|) in float64 into buf[0:M] (z and w of kind kz), the order statistics
 *       k and k9 (k9 < 0: none) of d selected in a copy in buf[M:2M]; sums of squares in
 *       float64 of the blocks cblk, ablk and the vector y (kinds 0 float32, 1 float64,
 *       2 bfloat16 bits, 3 float16 bits).  Any NaN in d makes max |d| NaN.
 *   stage1(...), stage1_batch(...)
 *       the signs, the three matrix-vector products and the statistics above in one call:
 *       one float32 / float64 matrix through the back end's BLAS (a numpy batch of
 *       float32 matrices: the helper's own products, see own_batch), or one with bfloat16
 *       or float16 operands through gemv16's kernels; every matrix of a strided batch.
 *   row_noise_batch(a, b, c, items, c2, s2, b2)
 *       ||C_i||^2 and sum_k a_ik^2 ||B_k||^2 of every row of the listed matrices of a batch.
 *   gemv16(x, v, out, isa=-1, f16=0, pool=0) -> isa
 *       out = x v in float32 for a bfloat16 (f16: float16) matrix x (uint16 bits,
 *       contiguous rows) and a float32 vector v: the matrix read once in its own bytes
 *       (AVX-512 / AVX2 / plain C, chosen at run time; isa 0, 1 or 2 asks for one of
 *       them, at most the CPU's); with pool 1 on the framework's OpenMP threads, with
 *       pool 2 on numpy's OpenBLAS threads.
 *   set_pool(parallel, thread_num, num_threads)
 *       registers the OpenMP threads (the addresses of the runtime's GOMP_parallel,
 *       omp_get_thread_num and omp_get_num_threads).
 *   set_blas_pool(pthread, num_threads), blas_shares()
 *       registers OpenBLAS's threads (its gotoblas_pthread and thread count); how many
 *       shares of the helper's products (16-bit, few-row float32) ran on them.
 *   common(a, b, c, ...), common_ptr(a_ptr, b_ptr, c_ptr, ...), common_batch(a, b, c, ...)
 *       verify's common call whole: the seed, stage 1 and the screen's decision, for one
 *       product of arrays, of CPU tensors at their addresses, or a strided batch, with
 *       per-shape plans registered by common_plan / common_batch_plan; where a row is
 *       beyond the screen, the batch call takes the per-row second look (row_relief's
 *       arithmetic) before handing the product to the general path.
 *   linear(x_ptr, out_ptr, ...)
 *       the guard's check of a linear product with a cached weight projection (and, given
 *       the weight's column norms, the same per-row second look).
 *   lean(fast, x, out, w, bias, seed, relief_min)
 *       linear's check repeated for a weight, bias and tensor shapes the guard remembers,
 *       with what it must see of the tensors (torch's TensorGuards, version counters,
 *       addresses, sampled bytes) checked in the same call.
 *   peek(address, offsets, itemsize[, expected])
 *       sampled bytes of a tensor's memory (the guard's fingerprint of a cached weight).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int get(PyObject *o, Py_buffer *b, int writable) {
    return PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0));
}

static inline float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t man = h & 0x3FFu;
    uint32_t u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: renormalise */
            int e = -1;
            do { e++; man <<= 1; } while ((man & 0x400u) == 0);
            man &= 0x3FFu;
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | (man << 13);
        }
    } else if (exp == 0x1F) {
        u = sign | 0x7F800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline double elem(const void *p, int kind, Py_ssize_t i) {
    switch (kind) {
    case 0: return (double)((const float *)p)[i];
    case 1: return ((const double *)p)[i];
    case 2: return (double)bf16_to_f32(((const uint16_t *)p)[i]);
    default: return (double)f16_to_f32(((const uint16_t *)p)[i]);
    }
}

/* bytes of an element of kind 0 float32, 1 float64, 2 bfloat16 bits, 3 float16 bits */
static inline Py_ssize_t kind_size(int kind) { return kind == 0 ? 4 : kind == 1 ? 8 : 2; }

static Py_ssize_t count(const Py_buffer *b, int kind) { return b->len / kind_size(kind); }

static double sumsq_n(const void *buf, Py_ssize_t n, int kind);
static double sumsq_rest(double s, const void *buf, Py_ssize_t n, int kind);
/* sum of squares of the whole buffer (rowlen 0), or the largest over its rows */
static double sumsq(const void *buf, Py_ssize_t n, int kind, Py_ssize_t rowlen) {
    if (rowlen <= 0 || rowlen >= n) return sumsq_n(buf, n, kind);
    Py_ssize_t item = kind_size(kind);
    double best = 0.0;
    for (Py_ssize_t r = 0; r + rowlen <= n; r += rowlen) {
        double v = sumsq_n((const char *)buf + r * item, rowlen, kind);
        if (v > best || v != v) best = v;
    }
    return best;
}

static int bf16_isa(void);
static int f16c_ok(void);
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#include <immintrin.h>
#define KC_X86 1

/* float64 sums of squares with independent accumulators (one is bound by the adds'
 * latency: a screen that reads every row of a small product's operands spent most of its
 * time there): each element widened to float64 and squared exactly (16-bit and float32
 * squares fit in float64's significand, subnormals included).  The rest of n past the
 * vector loop is left to the caller (*done: the elements done). */
__attribute__((target("avx512f,avx2,f16c")))
static inline __m512 load16_avx512(const char *b, int kind, Py_ssize_t j) {
    if (kind == 0) return _mm512_loadu_ps((const float *)b + j);
    __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)b + j));
    if (kind == 2) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
}

/* the squares of 32 floats (v0, then v1), widened, into four float64 accumulators: eight
 * elements each, in order (sumsq_avx512's step; the few-row kernel's, f32_rows_ss, too) */
__attribute__((target("avx512f")))
static inline void sq32_avx512(__m512 v0, __m512 v1, __m512d *s0, __m512d *s1, __m512d *s2,
                               __m512d *s3) {
    __m512d d0 = _mm512_cvtps_pd(_mm512_castps512_ps256(v0));
    __m512d d1 = _mm512_cvtps_pd(_mm256_castpd_ps(
        _mm512_extractf64x4_pd(_mm512_castps_pd(v0), 1)));
    __m512d d2 = _mm512_cvtps_pd(_mm512_castps512_ps256(v1));
    __m512d d3 = _mm512_cvtps_pd(_mm256_castpd_ps(
        _mm512_extractf64x4_pd(_mm512_castps_pd(v1), 1)));
    *s0 = _mm512_fmadd_pd(d0, d0, *s0);
    *s1 = _mm512_fmadd_pd(d1, d1, *s1);
    *s2 = _mm512_fmadd_pd(d2, d2, *s2);
    *s3 = _mm512_fmadd_pd(d3, d3, *s3);
}

__attribute__((target("avx512f,avx2,f16c")))
static double sumsq_avx512(const void *buf, Py_ssize_t n, int kind, Py_ssize_t *done) {
    const char *b = (const char *)buf;
    Py_ssize_t i = 0;
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    if (kind == 1) {
        __m512d s2 = _mm512_setzero_pd(), s3 = _mm512_setzero_pd();
        const double *x = (const double *)b;
        for (; i + 32 <= n; i += 32) {
            __m512d v0 = _mm512_loadu_pd(x + i), v1 = _mm512_loadu_pd(x + i + 8);
            __m512d v2 = _mm512_loadu_pd(x + i + 16), v3 = _mm512_loadu_pd(x + i + 24);
            s0 = _mm512_fmadd_pd(v0, v0, s0);
            s1 = _mm512_fmadd_pd(v1, v1, s1);
            s2 = _mm512_fmadd_pd(v2, v2, s2);
            s3 = _mm512_fmadd_pd(v3, v3, s3);
        }
        s0 = _mm512_add_pd(s0, s2);
        s1 = _mm512_add_pd(s1, s3);
    } else {
        __m512d s2 = _mm512_setzero_pd(), s3 = _mm512_setzero_pd();
        for (; i + 32 <= n; i += 32)
            sq32_avx512(load16_avx512(b, kind, i), load16_avx512(b, kind, i + 16),
                        &s0, &s1, &s2, &s3);
        s0 = _mm512_add_pd(s0, s2);
        s1 = _mm512_add_pd(s1, s3);
    }
    *done = i;
    return _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
}

__attribute__((target("avx2,fma,f16c")))
static inline __m256 load8_avx2(const char *b, int kind, Py_ssize_t j) {
    if (kind == 0) return _mm256_loadu_ps((const float *)b + j);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)b + j));
    if (kind == 2) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}

__attribute__((target("avx2,fma,f16c")))
static double sumsq_avx2(const void *buf, Py_ssize_t n, int kind, Py_ssize_t *done) {
    const char *b = (const char *)buf;
    Py_ssize_t i = 0;
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    if (kind == 1) {
        __m256d s2 = _mm256_setzero_pd(), s3 = _mm256_setzero_pd();
        const double *x = (const double *)b;
        for (; i + 16 <= n; i += 16) {
            __m256d v0 = _mm256_loadu_pd(x + i), v1 = _mm256_loadu_pd(x + i + 4);
            __m256d v2 = _mm256_loadu_pd(x + i + 8), v3 = _mm256_loadu_pd(x + i + 12);
            s0 = _mm256_fmadd_pd(v0, v0, s0);
            s1 = _mm256_fmadd_pd(v1, v1, s1);
            s2 = _mm256_fmadd_pd(v2, v2, s2);
            s3 = _mm256_fmadd_pd(v3, v3, s3);
        }
        s0 = _mm256_add_pd(s0, s2);
        s1 = _mm256_add_pd(s1, s3);
    } else {
        __m256d s2 = _mm256_setzero_pd(), s3 = _mm256_setzero_pd();
        for (; i + 16 <= n; i += 16) {
            __m256 v0 = load8_avx2(b, kind, i), v1 = load8_avx2(b, kind, i + 8);
            __m256d d0 = _mm256_cvtps_pd(_mm256_castps256_ps128(v0));
            __m256d d1 = _mm256_cvtps_pd(_mm256_extractf128_ps(v0, 1));
            __m256d d2 = _mm256_cvtps_pd(_mm256_castps256_ps128(v1));
            __m256d d3 = _mm256_cvtps_pd(_mm256_extractf128_ps(v1, 1));
            s0 = _mm256_fmadd_pd(d0, d0, s0);
            s1 = _mm256_fmadd_pd(d1, d1, s1);
            s2 = _mm256_fmadd_pd(d2, d2, s2);
            s3 = _mm256_fmadd_pd(d3, d3, s3);
        }
        s0 = _mm256_add_pd(s0, s2);
        s1 = _mm256_add_pd(s1, s3);
    }
    *done = i;
    __m256d t = _mm256_add_pd(s0, s1);
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(t), _mm256_extractf128_pd(t, 1));
    return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}
#endif

static double sumsq_n(const void *buf, Py_ssize_t n, int kind) {
    /* float64 sums of squares; the order of the additions is the vector loop's */
    double s = 0.0;
#ifdef KC_X86
    if (n >= 64) {
        int isa = bf16_isa();
        if (isa == 1 && kind == 3 && !f16c_ok()) isa = 0;
        Py_ssize_t done = 0;
        if (isa == 2) s = sumsq_avx512(buf, n, kind, &done);
        else if (isa == 1) s = sumsq_avx2(buf, n, kind, &done);
        if (done > 0) {
            buf = (const char *)buf + done * kind_size(kind);
            n -= done;
        }
    }
#endif
    return sumsq_rest(s, buf, n, kind);
}

/* s plus the squares of buf[0:n]: sumsq_n's part after its vector loop, one compiled copy
 * for it and for the fused row kernel (f32_rows_ss), so that both give the same bits */
__attribute__((noinline))
static double sumsq_rest(double s, const void *buf, Py_ssize_t n, int kind) {
    if (kind == 0) {
        const float *x = (const float *)buf;
#pragma omp simd reduction(+ : s)
        for (Py_ssize_t i = 0; i < n; i++) s += (double)x[i] * (double)x[i];
    } else if (kind == 1) {
        const double *x = (const double *)buf;
#pragma omp simd reduction(+ : s)
        for (Py_ssize_t i = 0; i < n; i++) s += x[i] * x[i];
    } else if (kind == 2) {
        const uint16_t *x = (const uint16_t *)buf;
#pragma omp simd reduction(+ : s)
        for (Py_ssize_t i = 0; i < n; i++) {
            union { uint32_t u; float f; } c;
            c.u = (uint32_t)x[i] << 16;
            s += (double)c.f * (double)c.f;
        }
    } else {
        for (Py_ssize_t i = 0; i < n; i++) {
            double v = elem(buf, kind, i);
            s += v * v;
        }
    }
    return s;
}

/* the k-th smallest of a[0:n] (0-based), reordering a (Hoare's selection) */
static double select_k(double *a, Py_ssize_t n, Py_ssize_t k) {
    Py_ssize_t lo = 0, hi = n - 1;
    while (hi > lo) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        /* median of three as the pivot */
        double x = a[lo], y = a[mid], z = a[hi];
        double p = (x < y) ? ((y < z) ? y : ((x < z) ? z : x)) : ((x < z) ? x : ((y < z) ? z : y));
        Py_ssize_t i = lo, j = hi;
        while (i <= j) {
            while (a[i] < p) i++;
            while (a[j] > p) j--;
            if (i <= j) {
                double t = a[i]; a[i] = a[j]; a[j] = t;
                i++; j--;
            }
        }
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else return a[k];
    }
    return a[k];
}

/* The k-th smallest of n finite doubles a[0:n] without data-dependent branches in its
 * passes (select_k's comparisons are mispredicted about half the time on fresh data: on
 * the 128 residuals of each matrix of an attention batch that cost more than the matrix's
 * three products).  Each pass writes every element to both of two buffers, advancing the
 * "below the pivot" or "above" end by the comparison's outcome, and counts the equal ones;
 * the pass then goes on in the part that holds the k-th, or returns the pivot.  The value
 * is select_k's (the k-th order statistic is one value).  buf: 4 SELECT_MAX doubles (on
 * the stack: 32 KiB). */
#define SELECT_MAX 1024
static double select_flat(const double *a, Py_ssize_t n, Py_ssize_t k, double *buf) {
    double *lo = buf, *hi = buf + SELECT_MAX;
    while (n > 0) {
        if (n <= 8) {  /* a few left: each one's rank among them */
            for (Py_ssize_t i = 0; i < n; i++) {
                Py_ssize_t below = 0, same = 0;
                for (Py_ssize_t j = 0; j < n; j++) {
                    below += a[j] < a[i];
                    same += a[j] == a[i];
                }
                if (below <= k && k < below + same) return a[i];
            }
            return a[k]; /* (not reached for finite values) */
        }
        double x = a[0], y = a[n / 2], z = a[n - 1];
        double p = (x < y) ? ((y < z) ? y : ((x < z) ? z : x))
                           : ((x < z) ? x : ((y < z) ? z : y));
        Py_ssize_t nl = 0, ng = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            double v = a[i];
            lo[nl] = v;
            hi[ng] = v;
            nl += v < p;
            ng += v > p;
        }
        Py_ssize_t ne = n - nl - ng;
        if (k < nl) {
            a = lo;
            n = nl;
        } else if (k < nl + ne) {
            return p;
        } else {
            a = hi;
            k -= nl + ne;
            n = ng;
        }
        /* the next pass writes to the other pair of buffers */
        double *other = (a == buf || a == buf + SELECT_MAX) ? buf + 2 * SELECT_MAX : buf;
        lo = other;
        hi = other + SELECT_MAX;
    }
    return NAN;
}

/* max |d| (NaN where d holds one), and the order statistics kmed and k9 (k9 < 0: none) of
 * d[0:M], selected in a copy at tmp[0:M] (up to SELECT_MAX values: select_flat, without
 * the copy) */
static void order_stats_in(const double *d, double *tmp, Py_ssize_t M, Py_ssize_t kmed,
                           Py_ssize_t k9, double *dmax_out, double *dk_out, double *dk9_out) {
    double dmax = 0.0, dk = NAN, dk9 = NAN;
    int nan = 0;
    for (Py_ssize_t i = 0; i < M; i++) {
        if (d[i] > dmax) dmax = d[i];
        else if (d[i] != d[i]) nan = 1;
    }
    if (!nan && isfinite(dmax) && M <= SELECT_MAX) {
        double buf[4 * SELECT_MAX];
        dk = select_flat(d, M, kmed, buf);
        if (k9 >= 0) dk9 = select_flat(d, M, k9, buf);
    } else if (!nan && isfinite(dmax)) {
        memcpy(tmp, d, (size_t)M * sizeof(double));
        if (k9 >= 0) {  /* the larger statistic first: the smaller one is then left of it */
            dk9 = select_k(tmp, M, k9);
            dk = select_k(tmp, k9 + 1, kmed);
        } else {
            dk = select_k(tmp, M, kmed);
        }
    } else if (nan) {
        dmax = NAN;
    }
    *dmax_out = dmax; *dk_out = dk; *dk9_out = dk9;
}

/* order_stats_in with the copy at d[M:2M] */
static void order_stats(double *d, Py_ssize_t M, Py_ssize_t kmed, Py_ssize_t k9,
                        double *dmax_out, double *dk_out, double *dk9_out) {
    order_stats_in(d, d + M, M, kmed, k9, dmax_out, dk_out, dk9_out);
}

/* the signs' generator (see kcontract.freivalds._screen.signs): SplitMix64's finaliser */
static inline uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static inline uint64_t sign_key(uint64_t lo, uint64_t hi, uint64_t stream, uint64_t attempt) {
    return mix64(mix64(lo) ^ hi ^ mix64((stream << 8) | attempt));
}

/* n signs of one key into out (kind 0 float32, 1 float64, 2 int8); returns their sum */
static Py_ssize_t fill_signs(uint64_t key, Py_ssize_t n, void *out, int kind) {
    Py_ssize_t neg = 0;
    for (Py_ssize_t j = 0; j * 64 < n; j++) {
        uint64_t word = mix64(key + (uint64_t)j * 0x9E3779B97F4A7C15ull);
        Py_ssize_t m = n - j * 64 < 64 ? n - j * 64 : 64;
        for (Py_ssize_t b = 0; b < m; b++) {
            int bit = (int)((word >> (63 - b)) & 1u);
            Py_ssize_t i = j * 64 + b;
            neg += bit;
            if (kind == 0) ((float *)out)[i] = bit ? -1.0f : 1.0f;
            else if (kind == 1) ((double *)out)[i] = bit ? -1.0 : 1.0;
            else ((int8_t *)out)[i] = (int8_t)(bit ? -1 : 1);
        }
    }
    return n - 2 * neg;
}

/* the balanced signs of (seed, stream): redrawn while |sum| < sqrt(n) / 4 (64 attempts) */
static Py_ssize_t balanced_signs(uint64_t lo, uint64_t hi, uint64_t stream, Py_ssize_t n,
                                 void *out, int kind) {
    double limit = 0.25 * sqrt((double)n);
    Py_ssize_t total = 0;
    for (uint64_t attempt = 0; attempt < 64; attempt++) {
        total = fill_signs(sign_key(lo, hi, stream, attempt), n, out, kind);
        if (n < 16 || fabs((double)total) >= limit) break;
    }
    return total;
}

static PyObject *signs(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "signs(seed_lo, seed_hi, stream, n, out, kind)");
        return NULL;
    }
    uint64_t lo = PyLong_AsUnsignedLongLong(args[0]), hi = PyLong_AsUnsignedLongLong(args[1]);
    uint64_t stream = PyLong_AsUnsignedLongLong(args[2]);
    Py_ssize_t n = PyLong_AsSsize_t(args[3]);
    long kind = PyLong_AsLong(args[5]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer out;
    if (get(args[4], &out, 1) < 0) return NULL;
    Py_ssize_t item = kind == 0 ? 4 : kind == 1 ? 8 : 1;
    if (n < 0 || out.len < n * item || kind < 0 || kind > 2) {
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, "signs: out too small or bad kind");
        return NULL;
    }
    Py_ssize_t total = balanced_signs(lo, hi, stream, n, out.buf, (int)kind);
    PyBuffer_Release(&out);
    return PyLong_FromSsize_t(total);
}

static PyObject *screen_stats(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 13) {
        PyErr_SetString(PyExc_TypeError,
                        "screen_stats(z, w, kz, buf, k, k9, cblk, kc, ablk, ka, y, ky, rows)");
        return NULL;
    }
    Py_ssize_t rows = PyLong_AsSsize_t(args[12]);
    long kz = PyLong_AsLong(args[2]);
    Py_ssize_t k = PyLong_AsSsize_t(args[4]);
    Py_ssize_t k9 = PyLong_AsSsize_t(args[5]);
    long kc = PyLong_AsLong(args[7]), ka = PyLong_AsLong(args[9]), ky = PyLong_AsLong(args[11]);
    if (PyErr_Occurred()) return NULL;
    if (kz < 0 || kz > 1 || kc < 0 || kc > 3 || ka < 0 || ka > 3 || ky < 0 || ky > 1) {
        PyErr_SetString(PyExc_ValueError, "screen_stats: bad kind");
        return NULL;
    }
    Py_buffer z, w, buf, cb, ab, yb;
    int have_w = args[1] != Py_None;
    if (get(args[0], &z, 0) < 0) return NULL;
    if (!have_w) {
        if (PyObject_GetBuffer(args[0], &w, PyBUF_C_CONTIGUOUS) < 0) { PyBuffer_Release(&z); return NULL; }
    } else if (get(args[1], &w, 0) < 0) { PyBuffer_Release(&z); return NULL; }
    if (get(args[3], &buf, 1) < 0) { PyBuffer_Release(&z); PyBuffer_Release(&w); return NULL; }
    if (get(args[6], &cb, 0) < 0) goto fail3;
    if (get(args[8], &ab, 0) < 0) goto fail4;
    if (get(args[10], &yb, 0) < 0) goto fail5;
    Py_ssize_t M = count(&z, (int)kz);
    if (count(&w, (int)kz) != M || buf.len < (Py_ssize_t)(2 * M * sizeof(double)) || M == 0
        || k < 0 || k >= M || k9 >= M) {
        PyErr_SetString(PyExc_ValueError, "screen_stats: sizes do not match");
        goto fail6;
    }
    double *d = (double *)buf.buf;
    if (!have_w) {  /* z is |d| already */
        for (Py_ssize_t i = 0; i < M; i++) {
            double v = fabs(elem(z.buf, (int)kz, i));
            d[i] = v;
        }
    } else if (kz == 0) {
        const float *zz = (const float *)z.buf, *ww = (const float *)w.buf;
        for (Py_ssize_t i = 0; i < M; i++) {
            double v = fabs((double)zz[i] - (double)ww[i]);
            d[i] = v;
        }
    } else {
        const double *zz = (const double *)z.buf, *ww = (const double *)w.buf;
        for (Py_ssize_t i = 0; i < M; i++) {
            double v = fabs(zz[i] - ww[i]);
            d[i] = v;
        }
    }
    double dmax, dk, dk9;
    order_stats(d, M, k, k9, &dmax, &dk, &dk9);
    /* rows > 0: the blocks hold `rows` rows each and the largest row's sum is wanted */
    Py_ssize_t nc = count(&cb, (int)kc), na = count(&ab, (int)ka);
    double css = sumsq(cb.buf, nc, (int)kc, rows > 0 ? nc / rows : 0);
    double ass = sumsq(ab.buf, na, (int)ka, rows > 0 ? na / rows : 0);
    double yss = sumsq_n(yb.buf, count(&yb, (int)ky), (int)ky);
    PyBuffer_Release(&z); PyBuffer_Release(&w); PyBuffer_Release(&buf);
    PyBuffer_Release(&cb); PyBuffer_Release(&ab); PyBuffer_Release(&yb);
    return Py_BuildValue("(dddddd)", dmax, dk, dk9, css, ass, yss);
fail6:
    PyBuffer_Release(&yb);
fail5:
    PyBuffer_Release(&ab);
fail4:
    PyBuffer_Release(&cb);
fail3:
    PyBuffer_Release(&z); PyBuffer_Release(&w); PyBuffer_Release(&buf);
    return NULL;
}

/* sum of squares of k rows from row i0 of a row-major matrix with `cols` columns, or
 * (rows > 0) the largest row's over all its rows */
static double block_sumsq(const void *X, int kind, Py_ssize_t rows, Py_ssize_t nrows,
                          Py_ssize_t cols, Py_ssize_t i0, Py_ssize_t k) {
    Py_ssize_t item = kind_size(kind);
    if (rows > 0) return sumsq(X, nrows * cols, kind, cols);
    return sumsq_n((const char *)X + i0 * cols * item, k * cols, kind);
}

/* CBLAS gemv, 64-bit (ILP64) and 32-bit integer interfaces */
typedef void (*sgemv64_t)(int, int, int64_t, int64_t, float, const float *, int64_t,
                          const float *, int64_t, float, float *, int64_t);
typedef void (*dgemv64_t)(int, int, int64_t, int64_t, double, const double *, int64_t,
                          const double *, int64_t, double, double *, int64_t);
typedef void (*sgemv32_t)(int, int, int, int, float, const float *, int,
                          const float *, int, float, float *, int);
typedef void (*dgemv32_t)(int, int, int, int, double, const double *, int,
                          const double *, int, double, double *, int);

/* Fortran BLAS gemv with 32-bit integers (MKL in torch's CPU library) */
typedef void (*sgemvf_t)(const char *, const int *, const int *, const float *, const float *,
                         const int *, const float *, const int *, const float *, float *,
                         const int *);
typedef void (*dgemvf_t)(const char *, const int *, const int *, const double *,
                         const double *, const int *, const double *, const int *,
                         const double *, double *, const int *);

/* interface: 0 CBLAS with 32-bit integers, 1 CBLAS with 64-bit integers, 2 Fortran (32-bit) */
static void gemv_t(uintptr_t fn, int ilp64, int dbl, int trans, Py_ssize_t M, Py_ssize_t K,
                   Py_ssize_t ld, const void *X, const void *v, void *out) {
    /* out = X v for an M x K matrix X whose element (i, j) is at X[i ld + j] (trans 0:
     * row-major) or at X[j ld + i] (trans 1: column-major) */
    if (trans) {  /* the memory is a row-major K x M matrix: out = (that matrix)^T v */
        if (ilp64 == 2) {  /* Fortran: X itself, column-major */
            const char t = 'N';
            const int m = (int)M, n = (int)K, l = (int)ld, one = 1;
            if (dbl) {
                const double a1 = 1.0, b0 = 0.0;
                ((dgemvf_t)fn)(&t, &m, &n, &a1, X, &l, v, &one, &b0, out, &one);
            } else {
                const float a1 = 1.0f, b0 = 0.0f;
                ((sgemvf_t)fn)(&t, &m, &n, &a1, X, &l, v, &one, &b0, out, &one);
            }
        } else if (dbl) {
            if (ilp64) ((dgemv64_t)fn)(101, 112, K, M, 1.0, X, ld, v, 1, 0.0, out, 1);
            else ((dgemv32_t)fn)(101, 112, (int)K, (int)M, 1.0, X, (int)ld, v, 1, 0.0, out, 1);
        } else {
            if (ilp64) ((sgemv64_t)fn)(101, 112, K, M, 1.0f, X, ld, v, 1, 0.0f, out, 1);
            else ((sgemv32_t)fn)(101, 112, (int)K, (int)M, 1.0f, X, (int)ld, v, 1, 0.0f, out, 1);
        }
        return;
    }
    if (ilp64 == 2) {  /* column-major view: X^T is K x M with leading dimension ld */
        const char t = 'T';
        const int m = (int)K, n = (int)M, l = (int)ld, one = 1;
        if (dbl) {
            const double a1 = 1.0, b0 = 0.0;
            ((dgemvf_t)fn)(&t, &m, &n, &a1, X, &l, v, &one, &b0, out, &one);
        } else {
            const float a1 = 1.0f, b0 = 0.0f;
            ((sgemvf_t)fn)(&t, &m, &n, &a1, X, &l, v, &one, &b0, out, &one);
        }
        return;
    }
    if (dbl) {
        if (ilp64) ((dgemv64_t)fn)(101, 111, M, K, 1.0, X, ld, v, 1, 0.0, out, 1);
        else ((dgemv32_t)fn)(101, 111, (int)M, (int)K, 1.0, X, (int)ld, v, 1, 0.0, out, 1);
    } else {
        if (ilp64) ((sgemv64_t)fn)(101, 111, M, K, 1.0f, X, ld, v, 1, 0.0f, out, 1);
        else ((sgemv32_t)fn)(101, 111, (int)M, (int)K, 1.0f, X, (int)ld, v, 1, 0.0f, out, 1);
    }
}

static void gemv(uintptr_t fn, int ilp64, int dbl, Py_ssize_t M, Py_ssize_t K, Py_ssize_t ld,
                 const void *X, const void *v, void *out) {
    gemv_t(fn, ilp64, dbl, 0, M, K, ld, X, v, out);
}

/* ---- bfloat16 matrix times float32 vector, float32 accumulation ---------------------
 * out[i] = sum_j x_ij v_j for a bfloat16 matrix X (bits; element (i, j) at X[i ld + j]).
 * A bfloat16 is the upper half of a float32, so the pair (x_2j, x_2j+1) read as one 32-bit
 * word w gives both exactly: x_2j = the float32 of bits w << 16, x_2j+1 = of w & 0xFFFF0000.
 * v is split once into its even and odd entries (ve, vo), and each word costs a shift, a
 * mask and two fused multiply-adds: the matrix is read once, in its own bytes, at about
 * the memory's speed (AVX-512 or AVX2 where the CPU has them, chosen at run time; plain C
 * elsewhere).  Four rows share each load of v.  The products x_ij v_j are exact in the
 * fused multiply-add and the sums are float32 (per-lane partial sums, then the lanes):
 * a float32 accumulation of K terms, as a float32 BLAS gemv makes. */
static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint32_t word_at(const uint16_t *p) {
    uint32_t w;
    memcpy(&w, p, 4);
    return w;
}

/* the entries from pair `from` on, and an odd K's last entry, of rows x[0..nr) */
static void bf16_tail(const uint16_t *const *x, int nr, Py_ssize_t from, Py_ssize_t K,
                      const float *v, float *s) {
    for (int r = 0; r < nr; r++) {
        float t = 0.0f;
        for (Py_ssize_t j = 2 * from; j < K; j++) t += bf16_to_f32(x[r][j]) * v[j];
        s[r] += t;
    }
}

static void bf16_rows_c(const uint16_t *X, Py_ssize_t ld, Py_ssize_t M, Py_ssize_t K,
                        const float *ve, const float *vo, const float *v, float *out) {
    Py_ssize_t h = K / 2, i = 0;
    for (; i + 4 <= M; i += 4) {
        const uint16_t *x[4] = {X + i * ld, X + (i + 1) * ld, X + (i + 2) * ld,
                                X + (i + 3) * ld};
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#pragma omp simd reduction(+:s0, s1, s2, s3)
        for (Py_ssize_t j = 0; j < h; j++) {
            uint32_t w0 = word_at(x[0] + 2 * j), w1 = word_at(x[1] + 2 * j);
            uint32_t w2 = word_at(x[2] + 2 * j), w3 = word_at(x[3] + 2 * j);
            float e = ve[j], o = vo[j];
            s0 += bits_f32(w0 << 16) * e + bits_f32(w0 & 0xFFFF0000u) * o;
            s1 += bits_f32(w1 << 16) * e + bits_f32(w1 & 0xFFFF0000u) * o;
            s2 += bits_f32(w2 << 16) * e + bits_f32(w2 & 0xFFFF0000u) * o;
            s3 += bits_f32(w3 << 16) * e + bits_f32(w3 & 0xFFFF0000u) * o;
        }
        float s[4] = {s0, s1, s2, s3};
        bf16_tail(x, 4, h, K, v, s);
        memcpy(out + i, s, sizeof s);
    }
    for (; i < M; i++) {
        const uint16_t *x0 = X + i * ld;
        float s0 = 0.0f;
#pragma omp simd reduction(+:s0)
        for (Py_ssize_t j = 0; j < h; j++) {
            uint32_t w0 = word_at(x0 + 2 * j);
            s0 += bits_f32(w0 << 16) * ve[j] + bits_f32(w0 & 0xFFFF0000u) * vo[j];
        }
        bf16_tail(&x0, 1, h, K, v, &s0);
        out[i] = s0;
    }
}

#ifdef KC_X86
__attribute__((target("avx2,fma")))
static inline float hsum256(__m256 a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The 16-bit kernels read a block of rows (four or eight) at once; each load also asks
 * for the same line of the next block's rows into L2 (PREFETCH_NEXT at `pf` bytes on: a
 * prefetch never faults, so past the matrix's end it asks for nothing useful and harms
 * nothing).  Right after a product the rows come from L3 or memory, and the hardware's
 * prefetchers, which follow each row's stream, start a block's eight streams late: numpy
 * bfloat16 squares' checks right after their products took 265 -> 203 us at 1024^3,
 * 741 -> 648 us at 2048^3 and 2393 -> 2067 us at 4096^3 with it (medians of 4-6
 * alternating runs of 31 each, the floors alike); asked into L1 instead, or two blocks
 * ahead, no better (273 and 201 us at 1024^3), half a block ahead worse (251 us), and
 * only for a block's first lines (to start the hardware's streams early) or every other
 * line, less than half the gain (in a slower phase of the machine: 253 us without, 175
 * with every line, 221-247 with those).  In cache it costs: the rows hot in L2 or L3,
 * one thread, 8.5 -> 10.0 us at 512^2, 33.2 -> 35.6 at 1024^2, 137 -> 162 at 2048^2
 * (best of three medians of 300) -- a check reads its rows right after their product,
 * which has streamed others through the caches.  The same at 512^3 in a slow phase of
 * the shared machine (checks at twice their usual time): numpy 69.4 -> 56.2 us (0.99 ->
 * 0.77 of the floor), torch 73.8 -> 69.6 us (medians of eight alternating runs of 21).
 * The float32 kernel below (f32_block_avx512) does the same: numpy float32 squares
 * 223 -> 216 us at 1024^3, 1299 -> 1030 at 2048^3, 5785 -> 3919 at 4096^3 (0.96 / 0.99 /
 * 1.01 of the floor -> 0.91 / 0.81 / 0.86), 43.2 -> 45.3 us at 512^3 (its rows mostly
 * in cache; 3-4 alternating runs of 21 each). */
#define PREFETCH_NEXT(p) _mm_prefetch((const char *)(p), _MM_HINT_T1)
/* the bytes from a block's rows (NR of them from row i of M, 16-bit, leading dimension
 * ld) to the next block's, where that block is whole; else 0 (the line being loaded: no
 * prefetch runs past the rows, where it would fetch other memory -- a skinny product's
 * 16 rows of 14336 elements would read 229 KiB more) */
#define PREFETCH_AHEAD(i, NR, M, ld) PREFETCH_AHEAD_OF(i, NR, M, ld, 2)
#define PREFETCH_AHEAD_OF(i, NR, M, ld, item) \
    ((i) + 2 * (NR) <= (M) ? (Py_ssize_t)(NR) * (ld) * (item) : 0)

__attribute__((target("avx2,fma")))
static void bf16_rows_avx2(const uint16_t *X, Py_ssize_t ld, Py_ssize_t M, Py_ssize_t K,
                           const float *ve, const float *vo, const float *v, float *out) {
    Py_ssize_t h = K / 2, hv = h & ~(Py_ssize_t)7, i = 0;
    const __m256i hi = _mm256_set1_epi32((int)0xFFFF0000u);
    for (; i < M; i += 4) {
        int nr = M - i < 4 ? (int)(M - i) : 4;
        Py_ssize_t pf = PREFETCH_AHEAD(i, 4, M, ld);
        const uint16_t *x[4];
        for (int r = 0; r < 4; r++) x[r] = X + (i + (r < nr ? r : 0)) * ld;
        __m256 a[4], b[4];
        for (int r = 0; r < 4; r++) a[r] = b[r] = _mm256_setzero_ps();
        for (Py_ssize_t j = 0; j < hv; j += 8) {
            __m256 e = _mm256_loadu_ps(ve + j), o = _mm256_loadu_ps(vo + j);
            for (int r = 0; r < 4; r++) {
                PREFETCH_NEXT((const char *)(x[r] + 2 * j) + pf);
                __m256i w = _mm256_loadu_si256((const __m256i *)(x[r] + 2 * j));
                a[r] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(w, 16)), e, a[r]);
                b[r] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(w, hi)), o, b[r]);
            }
        }
        float s[4];
        for (int r = 0; r < 4; r++) s[r] = hsum256(_mm256_add_ps(a[r], b[r]));
        bf16_tail(x, nr, hv, K, v, s);
        memcpy(out + i, s, (size_t)nr * sizeof(float));
    }
}

/* nr rows x[0..NR) (NR 4 or 8; the rows past nr repeat row 0, their sums unused) of
 * bf16_rows_avx512: each row's own accumulators, the same products whatever NR.
 *
 * Rows that start s pairs (4 s bytes, 0 < s < 16) into a cache line are read a whole line
 * at a time: lane l of line t holds pair 16 t - s + l, the first line's lanes below s and
 * the last line's from s on masked (neither read nor summed).  Each lane then sums the
 * same pairs in the same order as lane (l - s) mod 16 of the unaligned loop (masked lanes
 * keep their sums), and one permutation puts the lanes back before the lanes are summed:
 * the same bits wherever the row lies in memory.  Where a row starts moved this kernel by
 * up to 35 % (one thread, hot, 512 x 512 bfloat16: 7.7 us at a line's start, 10.4 us 16
 * or 48 bytes into it, 8.5 us 32 bytes in), most of it loads that straddle two lines. */
__attribute__((target("avx512f"), always_inline))
static inline void bf16_block_avx512(const uint16_t *const *x, int NR, int nr, Py_ssize_t K,
                                     Py_ssize_t hv, int s, const float *ve, const float *vo,
                                     const float *v, float *out, Py_ssize_t pf) {
    const __m512i hi = _mm512_set1_epi32((int)0xFFFF0000u);
    __m512 a[8], b[8];
    for (int r = 0; r < NR; r++) a[r] = b[r] = _mm512_setzero_ps();
    float sums[8];
    if (s == 0) {
        for (Py_ssize_t j = 0; j < hv; j += 16) {
            __m512 e = _mm512_loadu_ps(ve + j), o = _mm512_loadu_ps(vo + j);
            for (int r = 0; r < NR; r++) {
                PREFETCH_NEXT((const char *)(x[r] + 2 * j) + pf);
                __m512i w = _mm512_loadu_si512((const void *)(x[r] + 2 * j));
                a[r] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(w, 16)), e, a[r]);
                b[r] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(w, hi)), o, b[r]);
            }
        }
        for (int r = 0; r < NR; r++) sums[r] = _mm512_reduce_add_ps(_mm512_add_ps(a[r], b[r]));
    } else {
        const __mmask16 head = (__mmask16)(0xFFFFu << s), tail = (__mmask16)~head;
        const char *line[8];
        for (int r = 0; r < NR; r++) line[r] = (const char *)x[r] - 4 * s;
        /* line 0 from lane s on, the last line (`lines`) below lane s, those between whole
         * (half_job_init gives s > 0 only where hv >= 16).  The edge lines in their own
         * branch: masking every line was up to 30 % slower hot, 512^2 and 1024^2 rows 16 to
         * 48 bytes into a line (one-off A/B). */
        Py_ssize_t lines = hv / 16;
        for (Py_ssize_t t = 0; t <= lines; t++) {
            const float *pe = ve + 16 * t - s, *po = vo + 16 * t - s;
            for (int r = 0; r < NR; r++) PREFETCH_NEXT(line[r] + 64 * t + pf);
            if (t == 0 || t == lines) {
                __mmask16 m = t == 0 ? head : tail;
                __m512 e = _mm512_maskz_loadu_ps(m, pe), o = _mm512_maskz_loadu_ps(m, po);
                for (int r = 0; r < NR; r++) {
                    __m512i w = _mm512_maskz_load_epi32(m, line[r] + 64 * t);
                    a[r] = _mm512_mask3_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(w, 16)),
                                                 e, a[r], m);
                    b[r] = _mm512_mask3_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(w, hi)),
                                                 o, b[r], m);
                }
            } else {
                __m512 e = _mm512_loadu_ps(pe), o = _mm512_loadu_ps(po);
                for (int r = 0; r < NR; r++) {
                    __m512i w = _mm512_load_si512((const void *)(line[r] + 64 * t));
                    a[r] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(w, 16)), e,
                                           a[r]);
                    b[r] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(w, hi)), o,
                                           b[r]);
                }
            }
        }
        /* lane L of the unaligned loop is lane (L + s) mod 16 here: put back, so the sum
         * of the lanes does not rest on the shape of _mm512_reduce_add_ps's tree (GCC's
         * halving tree happens to give a rotation's sum the same bits; the test cannot
         * tell the permutation from none with it) */
        const __m512i back = _mm512_and_si512(
            _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13,
                                               14, 15), _mm512_set1_epi32(s)),
            _mm512_set1_epi32(15));
        for (int r = 0; r < NR; r++)
            sums[r] = _mm512_reduce_add_ps(
                _mm512_permutexvar_ps(back, _mm512_add_ps(a[r], b[r])));
    }
    bf16_tail(x, nr, hv, K, v, sums);
    memcpy(out, sums, (size_t)nr * sizeof(float));
}

/* rows in eights (eight rows sharing each load of v; numpy bfloat16 squares' checks in the
 * overhead benchmark, two runs each: 0.96-1.03 / 1.04-1.06 / 0.94-1.00 of the floor at
 * n = 512 / 1024 / 2048 against 1.02-1.17 / 1.11-1.19 / 1.04-1.07 in fours), the rest in
 * fours; s: the rows' common start within a cache line, in pairs (see bf16_block_avx512;
 * 0 for rows at a line's start and for rows that do not share one) */
__attribute__((target("avx512f")))
static void bf16_rows_avx512(const uint16_t *X, Py_ssize_t ld, Py_ssize_t M, Py_ssize_t K,
                             int s, const float *ve, const float *vo, const float *v,
                             float *out) {
    Py_ssize_t h = K / 2, hv = h & ~(Py_ssize_t)15, i = 0;
    for (; i + 8 <= M; i += 8) {
        const uint16_t *x[8];
        for (int r = 0; r < 8; r++) x[r] = X + (i + r) * ld;
        bf16_block_avx512(x, 8, 8, K, hv, s, ve, vo, v, out + i, PREFETCH_AHEAD(i, 8, M, ld));
    }
    for (; i < M; i += 4) {
        int nr = M - i < 4 ? (int)(M - i) : 4;
        const uint16_t *x[4];
        for (int r = 0; r < 4; r++) x[r] = X + (i + (r < nr ? r : 0)) * ld;
        bf16_block_avx512(x, 4, nr, K, hv, s, ve, vo, v, out + i, PREFETCH_AHEAD(i, 4, M, ld));
    }
}
#endif

/* ---- float16 matrix times float32 vector, float32 accumulation ----------------------
 * the same product for IEEE half-precision X (bits): each element widened exactly (the
 * CPU's conversion instruction where it has one, f16_to_f32 elsewhere) and multiplied by
 * v in a fused multiply-add; four rows share each load of v. */
static void f16_rows_c(const uint16_t *X, Py_ssize_t ld, Py_ssize_t M, Py_ssize_t K,
                       const float *v, float *out) {
    for (Py_ssize_t i = 0; i < M; i++) {
        const uint16_t *x0 = X + i * ld;
        float s0 = 0.0f;
        for (Py_ssize_t j = 0; j < K; j++) s0 += f16_to_f32(x0[j]) * v[j];
        out[i] = s0;
    }
}

#ifdef KC_X86
__attribute__((target("avx2,fma,f16c")))
static void f16_rows_avx2(const uint16_t *X, Py_ssize_t ld, Py_ssize_t M, Py_ssize_t K,
                          const float *v, float *out) {
    Py_ssize_t kv = K & ~(Py_ssize_t)7;
    for (Py_ssize_t i = 0; i < M; i += 4) {
        int nr = M - i < 4 ? (int)(M - i) : 4;
        Py_ssize_t pf = PREFETCH_AHEAD(i, 4, M, ld);
        const uint16_t *x[4];
        for (int r = 0; r < 4; r++) x[r] = X + (i + (r < nr ? r : 0)) * ld;
        __m256 a[4];
        for (int r = 0; r < 4; r++) a[r] = _mm256_setzero_ps();
        for (Py_ssize_t j = 0; j < kv; j += 8) {
            __m256 e = _mm256_loadu_ps(v + j);
            for (int r = 0; r < 4; r++) {
                PREFETCH_NEXT((const char *)(x[r] + j) + pf);
                __m128i h = _mm_loadu_si128((const __m128i *)(x[r] + j));
                a[r] = _mm256_fmadd_ps(_mm256_cvtph_ps(h), e, a[r]);
            }
        }
        float s[4];
        for (int r = 0; r < 4; r++) {
            s[r] = hsum256(a[r]);
            for (Py_ssize_t j = kv; j < K; j++) s[r] += f16_to_f32(x[r][j]) * v[j];
        }
        memcpy(out + i, s, (size_t)nr * sizeof(float));
    }
}

__attribute__((target("avx512f")))
static void f16_rows_avx512(const uint16_t *X, Py_ssize_t ld, Py_ssize_t M, Py_ssize_t K,
                            const float *v, float *out) {
    Py_ssize_t kv = K & ~(Py_ssize_t)15;
    for (Py_ssize_t i = 0; i < M; i += 4) {
        int nr = M - i < 4 ? (int)(M - i) : 4;
        Py_ssize_t pf = PREFETCH_AHEAD(i, 4, M, ld);
        const uint16_t *x[4];
        for (int r = 0; r < 4; r++) x[r] = X + (i + (r < nr ? r : 0)) * ld;
        __m512 a[4];
        for (int r = 0; r < 4; r++) a[r] = _mm512_setzero_ps();
        for (Py_ssize_t j = 0; j < kv; j += 16) {
            __m512 e = _mm512_loadu_ps(v + j);
            for (int r = 0; r < 4; r++) {
                PREFETCH_NEXT((const char *)(x[r] + j) + pf);
                __m256i h = _mm256_loadu_si256((const __m256i *)(x[r] + j));
                a[r] = _mm512_fmadd_ps(_mm512_cvtph_ps(h), e, a[r]);
            }
        }
        float s[4];
        for (int r = 0; r < 4; r++) {
            s[r] = _mm512_reduce_add_ps(a[r]);
            for (Py_ssize_t j = kv; j < K; j++) s[r] += f16_to_f32(x[r][j]) * v[j];
        }
        memcpy(out + i, s, (size_t)nr * sizeof(float));
    }
}
#endif

/* the instruction set the 16-bit kernels use: 2 AVX-512, 1 AVX2 with FMA (and F16C for
 * float16), 0 plain C */
static int bf16_isa(void) {
#ifdef KC_X86
    static int isa = -1;
    if (isa < 0) {
        __builtin_cpu_init();
        isa = __builtin_cpu_supports("avx512f") ? 2
              : (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) ? 1 : 0;
    }
    return isa;
#else
    return 0;
#endif
}

static int f16c_ok(void) {
#ifdef KC_X86
    static int ok = -1;
    if (ok < 0) {
        unsigned a, b, c, d;
        ok = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
    }
    return ok;
#else
    return 0;
#endif
}

/* the instruction set half_gemv runs with for `isa` (-1: the CPU's own; at most the
 * CPU's; float16 with AVX2 needs F16C too) */
static int half_isa(int isa, int f16) {
    int cpu = bf16_isa();
    if (f16 && cpu == 1 && !f16c_ok()) cpu = 0;
    return isa < 0 || isa > cpu ? cpu : isa;
}

/* ---- the host framework's OpenMP threads -------------------------------------------
 * A 16-bit product is bandwidth-bound, and one core does not draw all of the memory's
 * bandwidth (measured: about half of it on a 2-core Xeon).  The framework's own products
 * run on its OpenMP threads, which stay awake for a while after each parallel region; a
 * second pool of our own would compete with them for the same cores.  So the kernel runs
 * on the framework's pool itself: GOMP_parallel and the thread queries of the OpenMP
 * runtime the framework loaded (GNU libgomp, or a runtime with its entry points),
 * registered by set_pool from their addresses.  Rows are split in blocks of four, so each
 * row's sum is the one the serial kernel makes (the same code, the same order). */
typedef void (*gomp_parallel_t)(void (*)(void *), void *, unsigned, unsigned);
typedef int (*omp_query_t)(void);
static gomp_parallel_t pool_parallel;
static omp_query_t pool_thread_num, pool_num_threads;
/* below this many matrix elements the product stays on the calling thread */
#define POOL_MIN_ELEMS (1 << 17)

struct half_job {
    const uint16_t *X;
    Py_ssize_t ld, M, K;
    const float *ve, *vo, *v;
    float *out;
    int isa, f16;
    double *ss; /* (or NULL) each row's sum of squares, as sumsq_n makes it */
    int s;      /* bfloat16 rows' common start within a cache line, in pairs (or 0) */
    void *mem;  /* (or NULL) the memory of ve and vo, where the stack had too little */
};

static void half_rows_dot(const struct half_job *j, Py_ssize_t i0, Py_ssize_t i1);

/* the rows [i0, i1) of a half_gemv; with ss, four rows at a time, each block's sums of
 * squares right after its products, while its rows are still in the core's caches (the
 * products are the same: the kernels take rows in blocks of four) */
static void half_rows(const struct half_job *j, Py_ssize_t i0, Py_ssize_t i1) {
    if (j->ss == NULL) {
        half_rows_dot(j, i0, i1);
        return;
    }
    for (Py_ssize_t b = i0; b < i1; b += 4) {
        Py_ssize_t e = b + 4 < i1 ? b + 4 : i1;
        half_rows_dot(j, b, e);
        for (Py_ssize_t i = b; i < e; i++)
            j->ss[i] = sumsq_n(j->X + i * j->ld, j->K, j->f16 ? 3 : 2);
    }
}

static void half_rows_dot(const struct half_job *j, Py_ssize_t i0, Py_ssize_t i1) {
    const uint16_t *X = j->X + i0 * j->ld;
    Py_ssize_t M = i1 - i0;
    float *out = j->out + i0;
    if (j->f16) {
#ifdef KC_X86
        if (j->isa == 2) f16_rows_avx512(X, j->ld, M, j->K, j->v, out);
        else if (j->isa == 1) f16_rows_avx2(X, j->ld, M, j->K, j->v, out);
        else
#endif
            f16_rows_c(X, j->ld, M, j->K, j->v, out);
        return;
    }
#ifdef KC_X86
    if (j->isa == 2) bf16_rows_avx512(X, j->ld, M, j->K, j->s, j->ve, j->vo, j->v, out);
    else if (j->isa == 1) bf16_rows_avx2(X, j->ld, M, j->K, j->ve, j->vo, j->v, out);
    else
#endif
        bf16_rows_c(X, j->ld, M, j->K, j->ve, j->vo, j->v, out);
}

/* ---- numpy's OpenBLAS threads ----------------------------------------------------------
 * numpy's products run on its bundled OpenBLAS's threads, which spin for a while after
 * each product (its thread server's timeout); a thread of our own beside them gets the
 * second core late or not at all.  OpenBLAS exports gotoblas_pthread(n, fn, args, stride):
 * fn(args + i stride) for i < n, the first on the calling thread and the others on its
 * own threads -- the ones that are spinning.  Registered by set_blas_pool. */
typedef int (*blas_pthread_t)(int, void *, void *, int);
typedef int (*blas_threads_t)(void);
static blas_pthread_t blas_pthread;
static blas_threads_t blas_threads;
/* entries into a region of ours by OpenBLAS's threads rather than the caller's */
static unsigned long long blas_shares;
#define BLAS_POOL_MAX 64

/* ---- a range of rows on the host library's threads ---------------------------------
 * fn(ctx, i0, i1) over [0, n) in chunks of whole blocks of `block` rows, on the threads of
 * the pool the back end's products ran on (1: the framework's OpenMP threads, 2: numpy's
 * OpenBLAS threads; 0, or none registered: the calling thread).  Each row's work is the
 * same whichever thread does it. */
typedef void (*range_fn)(const void *ctx, Py_ssize_t i0, Py_ssize_t i1);
struct range_job {
    range_fn fn;
    const void *ctx;
    Py_ssize_t n, block;
};

/* several jobs in one parallel region (a check's A y and C r: one fork and join, and both
 * products over every thread).  Each job's rows go in RANGE_CHUNKS chunks (fewer where it
 * has fewer blocks), each thread taking the next chunk until none is left: a thread that
 * joins late or runs slow (a shared machine's busy core) does less of the work, where a
 * fixed share each had made the region wait for the slowest.  Measured on a 2-core VM
 * whose cores each ran ~30 % slower at times (numpy bfloat16 512^3 checks right after
 * their products, one process, variants interleaved): with a core slow, the slower
 * core's thread ended ~10 us after the other in fixed shares, and the checks took 58 and
 * 63 us (medians, 16 chunks a job) against 78 and 78 in fixed shares; with both cores
 * fast, 33.9-41.2 us (8 chunks a job), 34.9-42.9 (16) and 34.7-44.5 (fixed shares) in
 * three runs. */
#define RANGE_JOBS_MAX 2
#define RANGE_CHUNKS 8
struct range_set {
    const struct range_job *jobs;
    int n;
    Py_ssize_t rows[RANGE_JOBS_MAX];      /* rows of a job's chunk */
    Py_ssize_t first[RANGE_JOBS_MAX + 1]; /* a job's first chunk; the last entry: all */
    Py_ssize_t next;                      /* the next chunk to take (atomic) */
};

static void range_set_init(struct range_set *s, const struct range_job *jobs, int n) {
    s->jobs = jobs;
    s->n = n;
    s->next = 0;
    s->first[0] = 0;
    for (int i = 0; i < n; i++) {
        Py_ssize_t blocks = (jobs[i].n + jobs[i].block - 1) / jobs[i].block;
        Py_ssize_t per = (blocks + RANGE_CHUNKS - 1) / RANGE_CHUNKS;
        s->rows[i] = (per > 0 ? per : 1) * jobs[i].block;
        s->first[i + 1] = s->first[i] + (jobs[i].n + s->rows[i] - 1) / s->rows[i];
    }
}

static void range_set_run(struct range_set *s) {
    for (;;) {
        Py_ssize_t c = __atomic_fetch_add(&s->next, 1, __ATOMIC_RELAXED);
        if (c >= s->first[s->n]) return;
        int i = 0;
        while (c >= s->first[i + 1]) i++;
        const struct range_job *j = &s->jobs[i];
        Py_ssize_t i0 = (c - s->first[i]) * s->rows[i], i1 = i0 + s->rows[i];
        j->fn(j->ctx, i0, i1 < j->n ? i1 : j->n);
    }
}

static void range_omp(void *p) {
    range_set_run(p);
}

struct range_part {
    struct range_set *set;
    pthread_t caller;
};

static void range_blas(void *p) {
    const struct range_part *s = p;
    range_set_run(s->set);
    if (!pthread_equal(s->caller, pthread_self()))
        __atomic_add_fetch(&blas_shares, 1, __ATOMIC_RELAXED);
}

/* the jobs on `pool`'s threads (0, or none registered: one after another on the calling
 * thread) */
static void on_pool_jobs(int pool, const struct range_job *jobs, int n) {
    struct range_set set;
    if (pool == 2 && blas_pthread != NULL) {
        int nt = blas_threads();
        if (nt > BLAS_POOL_MAX) nt = BLAS_POOL_MAX;
        if (nt >= 2) {
            range_set_init(&set, jobs, n);
            struct range_part parts[BLAS_POOL_MAX];
            pthread_t self = pthread_self();
            for (int t = 0; t < nt; t++) parts[t] = (struct range_part){&set, self};
            blas_pthread(nt, (void *)range_blas, parts, (int)sizeof(struct range_part));
            return;
        }
    } else if (pool == 1 && pool_parallel != NULL) {
        range_set_init(&set, jobs, n);
        pool_parallel(range_omp, &set, 0, 0);
        return;
    }
    for (int i = 0; i < n; i++) jobs[i].fn(jobs[i].ctx, 0, jobs[i].n);
}

static void on_pool(int pool, range_fn fn, const void *ctx, Py_ssize_t n, Py_ssize_t block) {
    struct range_job job = {fn, ctx, n, block};
    on_pool_jobs(pool, &job, 1);
}

static void half_range(const void *job, Py_ssize_t i0, Py_ssize_t i1) {
    half_rows(job, i0, i1);
}

/* out = X v (M x K bfloat16 bits, or float16 bits with f16, leading dimension ld; v, out
 * float32) with the instruction set `isa` (see half_isa): on the registered pool's
 * threads with `pool` (where one is registered and the product is large enough), else
 * on the calling thread; ss (or NULL): each row's sum of squares too (see half_rows); -1
 * where the scratch for v's halves cannot be had */
#define HALF_STACK 1024
/* a half_gemv's job (its arguments), with v's even and odd halves for bfloat16 in stack
 * (HALF_STACK_FLOATS floats: halves of up to HALF_STACK entries) or, for longer rows, in
 * memory of its own (half_job_done frees it); -1 where that cannot be had.  The halves
 * are laid out for the kernel's line-at-a-time loads: ve - s and vo - s on 64-byte
 * boundaries, s floats before each in the memory (see bf16_block_avx512). */
#define HALF_STACK_FLOATS (2 * HALF_STACK + 64)
static int half_job_init(struct half_job *job, const uint16_t *X, Py_ssize_t ld, Py_ssize_t M,
                         Py_ssize_t K, const float *v, float *out, int isa, int f16,
                         double *ss, float *stack) {
    *job = (struct half_job){X, ld, M, K, NULL, NULL, v, out, half_isa(isa, f16), f16, ss,
                             0, NULL};
    if (!f16) {
        Py_ssize_t h = K / 2;
        uintptr_t at = (uintptr_t)X;
        /* rows at one start within a line, a whole number of pairs into it (ld a multiple
         * of 32 elements, or one row) */
        if (job->isa == 2 && h >= 16 && at % 4 == 0 && (M == 1 || ld % 32 == 0))
            job->s = (int)(at % 64 / 4);
        Py_ssize_t span = (job->s + h + 15) & ~(Py_ssize_t)15; /* from ve - s to vo - s */
        Py_ssize_t need = span + job->s + h + 16; /* (15 floats at most to a boundary) */
        float *mem = stack;
        if (need > HALF_STACK_FLOATS) {
            if (!(mem = malloc((size_t)need * sizeof(float)))) return -1;
            job->mem = mem;
        }
        float *base = mem + (16 - (uintptr_t)mem / sizeof(float) % 16) % 16;
        float *ve = base + job->s, *vo = ve + span;
        for (Py_ssize_t j = 0; j < h; j++) {
            ve[j] = v[2 * j];
            vo[j] = v[2 * j + 1];
        }
        job->ve = ve;
        job->vo = vo;
    }
    return 0;
}

static void half_job_done(struct half_job *job) {
    free(job->mem);
}

/* whether a 16-bit product of M x K goes to the pool's threads (rows in blocks of four) */
static int half_pooled(int pool, Py_ssize_t M, Py_ssize_t K) {
    return pool && M >= 8 && M * K >= POOL_MIN_ELEMS;
}

static int half_gemv(const uint16_t *X, Py_ssize_t ld, Py_ssize_t M, Py_ssize_t K,
                     const float *v, float *out, int isa, int f16, int pool, double *ss) {
    struct half_job job;
    float stack[HALF_STACK_FLOATS];
    if (half_job_init(&job, X, ld, M, K, v, out, isa, f16, ss, stack) < 0) return -1;
    if (half_pooled(pool, M, K))
        on_pool(pool, half_range, &job, M, 4);
    else
        half_rows(&job, 0, M);
    half_job_done(&job);
    return 0;
}

/* ---- float32 rows times a vector, with each row's sum of squares ---------------------
 * For products of at most SMALL_ROWS rows (kcontract.freivalds._screen) the screen wants
 * every row's sum of squares of A and C beside A y and C r.  Read after the gemv, from the
 * caches a large product has just emptied, the second pass cost a third to a half of the
 * products themselves (18 us after 46 us for a 16 x 14336 float32 A, measured).  Here one
 * pass makes both: out[i] = x_i . v (float32 lanes, then the lanes, then the tail in
 * order: a float32 accumulation of K terms, as a float32 BLAS gemv makes) and
 * ss[i] = sumsq_n(x_i, K) bit for bit (sumsq_avx512's step, sq32_avx512, and its sums,
 * then sumsq_rest), so the screen's statistics are those of every other path.  Two rows
 * share each load of v; rows are split over the back end's threads in pairs (each row's
 * sums are the same whichever thread makes them).  AVX-512 only (the caller keeps the two
 * passes elsewhere). */
#define FUSED_MAX_ROWS 64

#ifdef KC_X86
/* nr (1, 2, or 8 without sums of squares) rows from x[0..nr) of f32_rows_ss_avx512, with
 * their sums of squares where with_ss (both constants where it is called: each row's
 * products are the same either way, and whatever the rows beside it); the next block's
 * rows, pf bytes on, asked into L2 as it goes (see PREFETCH_NEXT) */
__attribute__((target("avx512f"), always_inline))
static inline void f32_block_avx512(const float *const *x, int nr, int with_ss, Py_ssize_t K,
                                    Py_ssize_t kv, const float *v, float *out, double *ss,
                                    Py_ssize_t pf) {
    __m512 a[8], b[8];
    __m512d p[8][4];
    for (int r = 0; r < nr; r++) {
        a[r] = b[r] = _mm512_setzero_ps();
        for (int q = 0; q < 4; q++) p[r][q] = _mm512_setzero_pd();
    }
    for (Py_ssize_t j = 0; j < kv; j += 32) {
        __m512 e = _mm512_loadu_ps(v + j), o = _mm512_loadu_ps(v + j + 16);
        for (int r = 0; r < nr; r++) {
            PREFETCH_NEXT((const char *)(x[r] + j) + pf);
            PREFETCH_NEXT((const char *)(x[r] + j + 16) + pf);
            __m512 u0 = _mm512_loadu_ps(x[r] + j), u1 = _mm512_loadu_ps(x[r] + j + 16);
            a[r] = _mm512_fmadd_ps(u0, e, a[r]);
            b[r] = _mm512_fmadd_ps(u1, o, b[r]);
            if (with_ss) sq32_avx512(u0, u1, &p[r][0], &p[r][1], &p[r][2], &p[r][3]);
        }
    }
    for (int r = 0; r < nr; r++) {
        if (with_ss) {
            double s = kv ? _mm512_reduce_add_pd(_mm512_add_pd(
                                _mm512_add_pd(p[r][0], p[r][2]), _mm512_add_pd(p[r][1], p[r][3])))
                          : 0.0;
            ss[r] = sumsq_rest(s, x[r] + kv, K - kv, 0);
        }
        float t = 0.0f;
        for (Py_ssize_t j = kv; j < K; j++) t += x[r][j] * v[j];
        out[r] = (kv ? _mm512_reduce_add_ps(_mm512_add_ps(a[r], b[r])) : 0.0f) + t;
    }
}

/* out = X v for float32 rows (leading dimension ld), and ss[i] = row i's sum of squares
 * where ss is not NULL; rows in pairs sharing each load of v, in eights without the sums
 * of squares (each row's own accumulators either way: the same products) */
__attribute__((target("avx512f")))
static void f32_rows_ss_avx512(const float *X, Py_ssize_t ld, Py_ssize_t M, Py_ssize_t K,
                               const float *v, float *out, double *ss) {
    /* sumsq_n runs its vector loop from 64 elements on, over whole runs of 32 */
    Py_ssize_t kv = K >= 64 ? K & ~(Py_ssize_t)31 : 0, i = 0;
    if (!ss)
        for (; i + 8 <= M; i += 8) {
            const float *x[8];
            for (int r = 0; r < 8; r++) x[r] = X + (i + r) * ld;
            f32_block_avx512(x, 8, 0, K, kv, v, out + i, NULL, PREFETCH_AHEAD_OF(i, 8, M, ld, 4));
        }
    for (; i + 2 <= M; i += 2) {
        const float *x[2] = {X + i * ld, X + (i + 1) * ld};
        Py_ssize_t pf = PREFETCH_AHEAD_OF(i, 2, M, ld, 4);
        if (ss) f32_block_avx512(x, 2, 1, K, kv, v, out + i, ss + i, pf);
        else f32_block_avx512(x, 2, 0, K, kv, v, out + i, NULL, pf);
    }
    if (i < M) {  /* an odd last row on its own */
        const float *x[1] = {X + i * ld};
        if (ss) f32_block_avx512(x, 1, 1, K, kv, v, out + i, ss + i, 0);
        else f32_block_avx512(x, 1, 0, K, kv, v, out + i, NULL, 0);
    }
}
#endif

struct f32ss_job {
    const float *X;
    Py_ssize_t ld, K;
    const float *v;
    float *out;
    double *ss;
};

static void f32ss_range(const void *p, Py_ssize_t i0, Py_ssize_t i1) {
#ifdef KC_X86
    const struct f32ss_job *j = p;
    f32_rows_ss_avx512(j->X + i0 * j->ld, j->ld, i1 - i0, j->K, j->v, j->out + i0,
                       j->ss ? j->ss + i0 : NULL);
#else
    (void)p, (void)i0, (void)i1;
#endif
}

/* below this many float32 elements (or 8 rows) the few-row kernel stays on the calling
 * thread: handing out 2 to 7 rows, or 32 K elements, cost more than the second core gave
 * right after a product (measured: 4 x 14336 25.3 -> 29.4 us on the pool, 8 x 4096
 * 18.9 -> 16.8) */
#define F32_POOL_MIN_ELEMS (1 << 15)

/* whether f32_rows_ss runs on this CPU */
static int f32_rows_ss_ok(void) { return bf16_isa() == 2; }

/* out = X v and (ss not NULL) ss[i] = the squares of row i summed (M x K float32, leading
 * dimension ld), on the pool's threads where the matrix is large enough; f32_rows_ss_ok()
 * must hold */
static int f32_pooled(int pool, Py_ssize_t M, Py_ssize_t K) {
    return pool && M >= 8 && M * K >= F32_POOL_MIN_ELEMS;
}

static void f32_rows_ss(const float *X, Py_ssize_t ld, Py_ssize_t M, Py_ssize_t K,
                        const float *v, float *out, double *ss, int pool) {
    struct f32ss_job job = {X, ld, K, v, out, ss};
    if (f32_pooled(pool, M, K))
        on_pool(pool, f32ss_range, &job, M, 2);
    else
        f32ss_range(&job, 0, M);
}

/* A check's float32 products X v (M x K, row-major, leading dimension K) are the row kernel's
 * above (eight rows sharing each load of v where no sums of squares are wanted) on the back
 * end's threads rather than the BLAS gemv's the back end itself calls: measured faster
 * (benchmarks/bench_rows_dot.py, 2-core AMD Zen 4: the three products of a square check
 * right after its product) than torch's MKL sgemv_ at every size -- 0.31-0.57 of
 * torch.mv's time from n = 256 to 4096 (MKL's generic kernels on this CPU) -- and than
 * numpy's OpenBLAS sgemv, 0.63-0.91 (in a one-off with pairs of rows it had been 1.04-1.08
 * from n = 768 up).  Each row's sum is the same whichever thread makes it, with or
 * without threads, and the general path asks the same rule (_fastc.own_gemv, in
 * _screen.stage1_matvec) and makes the same products: every path decides alike.  (The
 * BLAS where the kernel does not run here: no AVX-512.) */
static int own_gemv(Py_ssize_t M, Py_ssize_t K) {
    return M > 0 && K > 0 && f32_rows_ss_ok();
}

/* a check's X v (M x K row-major, leading dimension K; float64 with dbl): the row kernel
 * where own_gemv holds, else the BLAS gemv at fn */
static void check_gemv(uintptr_t fn, int ilp64, int dbl, Py_ssize_t M, Py_ssize_t K,
                       const void *X, const void *v, void *out, int pool) {
    if (!dbl && own_gemv(M, K))
        f32_rows_ss(X, K, M, K, v, out, NULL, pool);
    else
        gemv(fn, ilp64, dbl, M, K, K, X, v, out);
}

/* ---- small float32 products of a batch on numpy's OpenBLAS threads ------------------
 * A numpy batch's matrices (attention's q k^T: 24 matrices of 128 x 64 times 64 x 128)
 * are each too small for OpenBLAS to thread one product, and OpenBLAS cannot be called
 * from its own threads: stage 1 of such a batch ran on the calling thread, a fifth slower
 * than numpy's own three batched products there.  These kernels make the products
 * instead, each matrix's on one of OpenBLAS's threads (see run_stage1_batch): out = X v
 * for X row-major (each out[i] a float32 accumulation of K terms: sixteen lanes, then the
 * lanes, then the tail in order) or column-major (each out[i] the K terms added in order):
 * within the float32 bound of a BLAS gemv.  AVX-512 only. */
#ifdef KC_X86
__attribute__((target("avx512f")))
static void f32_gemv_avx512(int trans, Py_ssize_t M, Py_ssize_t K, Py_ssize_t ld,
                            const float *X, const float *v, float *out) {
    if (!trans) {  /* (one row at a time: the few-row kernel's pairs of rows were slower
                    * here -- the benchmark's 32 x 512x64x512 attention batch 0.60-0.67 of
                    * the floor with them, 0.44-0.49 without) */
        Py_ssize_t kv = K & ~(Py_ssize_t)31;
        for (Py_ssize_t i = 0; i < M; i++) {
            const float *x = X + i * ld;
            __m512 a = _mm512_setzero_ps(), b = _mm512_setzero_ps();
            for (Py_ssize_t j = 0; j < kv; j += 32) {
                a = _mm512_fmadd_ps(_mm512_loadu_ps(x + j), _mm512_loadu_ps(v + j), a);
                b = _mm512_fmadd_ps(_mm512_loadu_ps(x + j + 16), _mm512_loadu_ps(v + j + 16), b);
            }
            float t = 0.0f;
            for (Py_ssize_t j = kv; j < K; j++) t += x[j] * v[j];
            out[i] = (kv ? _mm512_reduce_add_ps(_mm512_add_ps(a, b)) : 0.0f) + t;
        }
        return;
    }
    /* element (i, j) at X[j ld + i]: rows of the memory scaled by v_j and added, each
     * out[i] from zero in the order of j -- in registers, 64 columns at a time, for a
     * few hundred columns; through out (in the core's first cache) for more, so that the
     * memory is read row after row: the same operations on each out[i], the same bits */
    Py_ssize_t i = 0;
    if (M > 256) {
        Py_ssize_t mv = M & ~(Py_ssize_t)15;
        __mmask16 m = (__mmask16)((1u << (M - mv)) - 1);
        memset(out, 0, (size_t)M * sizeof(float));
        for (Py_ssize_t j = 0; j < K; j++) {
            const float *x = X + j * ld;
            __m512 e = _mm512_set1_ps(v[j]);
            for (i = 0; i < mv; i += 16)
                _mm512_storeu_ps(out + i, _mm512_fmadd_ps(_mm512_loadu_ps(x + i), e,
                                                          _mm512_loadu_ps(out + i)));
            if (m)
                _mm512_mask_storeu_ps(out + mv, m,
                                      _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + mv), e,
                                                      _mm512_maskz_loadu_ps(m, out + mv)));
        }
        return;
    }
    for (; i + 64 <= M; i += 64) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (Py_ssize_t j = 0; j < K; j++) {
            const float *x = X + j * ld + i;
            __m512 e = _mm512_set1_ps(v[j]);
            a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x), e, a0);
            a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + 16), e, a1);
            a2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + 32), e, a2);
            a3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + 48), e, a3);
        }
        _mm512_storeu_ps(out + i, a0);
        _mm512_storeu_ps(out + i + 16, a1);
        _mm512_storeu_ps(out + i + 32, a2);
        _mm512_storeu_ps(out + i + 48, a3);
    }
    for (; i < M; i += 16) {
        __mmask16 m = M - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (M - i)) - 1);
        __m512 a0 = _mm512_setzero_ps();
        for (Py_ssize_t j = 0; j < K; j++)
            a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, X + j * ld + i),
                                 _mm512_set1_ps(v[j]), a0);
        _mm512_mask_storeu_ps(out + i, m, a0);
    }
}
#endif

/* the n function addresses of a registration call into a (usage: its signature); 1
 * where all are set, 0 where one is 0 (none registered), -1 with an error set */
static int addresses(PyObject *const *args, Py_ssize_t nargs, int n, uintptr_t *a,
                     const char *usage) {
    if (nargs != n) {
        PyErr_SetString(PyExc_TypeError, usage);
        return -1;
    }
    int all = 1;
    for (int i = 0; i < n; i++) {
        a[i] = (uintptr_t)PyLong_AsUnsignedLongLong(args[i]);
        if (PyErr_Occurred()) return -1;
        all &= a[i] != 0;
    }
    return all;
}

/* set_pool(parallel, thread_num, num_threads): the addresses of GOMP_parallel,
 * omp_get_thread_num and omp_get_num_threads of the framework's OpenMP runtime (all 0:
 * none; the helper's products then run on the calling thread) */
static PyObject *set_pool(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    uintptr_t a[3];
    int all = addresses(args, nargs, 3, a, "set_pool(parallel, thread_num, num_threads)");
    if (all < 0) return NULL;
    pool_parallel = all ? (gomp_parallel_t)a[0] : NULL;
    pool_thread_num = all ? (omp_query_t)a[1] : NULL;
    pool_num_threads = all ? (omp_query_t)a[2] : NULL;
    return PyBool_FromLong(all);
}

/* set_blas_pool(pthread, num_threads): the addresses of OpenBLAS's gotoblas_pthread and
 * openblas_get_num_threads (both 0: none) */
static PyObject *set_blas_pool(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    uintptr_t a[2];
    int all = addresses(args, nargs, 2, a, "set_blas_pool(pthread, num_threads)");
    if (all < 0) return NULL;
    blas_pthread = all ? (blas_pthread_t)a[0] : NULL;
    blas_threads = all ? (blas_threads_t)a[1] : NULL;
    return PyBool_FromLong(all);
}

static PyObject *blas_shares_py(PyObject *self, PyObject *unused) {
    return PyLong_FromUnsignedLongLong(__atomic_load_n(&blas_shares, __ATOMIC_RELAXED));
}

/* gemv16(x, v, out, isa=-1, f16=0, pool=0) -> the instruction set used: out = x v for a
 * 2-D bfloat16 (f16: float16) array x (any buffer of 2-byte items whose rows are
 * contiguous) and float32 v, out; pool 1: on the registered OpenMP threads (see
 * set_pool), 2: on OpenBLAS's (see set_blas_pool), 0: on the calling thread */
static PyObject *gemv16_py(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 3 || nargs > 6) {
        PyErr_SetString(PyExc_TypeError, "gemv16(x, v, out, isa=-1, f16=0, pool=0)");
        return NULL;
    }
    int isa = nargs >= 4 ? (int)PyLong_AsLong(args[3]) : -1;
    int f16 = nargs >= 5 ? PyObject_IsTrue(args[4]) : 0;
    int pool = nargs == 6 ? (int)PyLong_AsLong(args[5]) : 0;
    if (PyErr_Occurred()) return NULL;
    Py_buffer x, v, out;
    if (PyObject_GetBuffer(args[0], &x, PyBUF_STRIDES) < 0) return NULL;
    if (get(args[1], &v, 0) < 0) { PyBuffer_Release(&x); return NULL; }
    if (get(args[2], &out, 1) < 0) { PyBuffer_Release(&x); PyBuffer_Release(&v); return NULL; }
    int ok = x.ndim == 2 && x.itemsize == 2 && (x.shape[1] <= 1 || x.strides[1] == 2)
             && x.strides[0] % 2 == 0 && (x.shape[0] <= 1 || x.strides[0] >= 2 * x.shape[1])
             && v.len == x.shape[1] * 4 && out.len == x.shape[0] * 4;
    int rc = 0;
    if (ok) {
        Py_ssize_t ld = x.shape[0] <= 1 ? x.shape[1] : x.strides[0] / 2;
        Py_BEGIN_ALLOW_THREADS
        rc = half_gemv((const uint16_t *)x.buf, ld, x.shape[0], x.shape[1],
                       (const float *)v.buf, (float *)out.buf, isa, f16, pool, NULL);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&x); PyBuffer_Release(&v); PyBuffer_Release(&out);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "gemv16: shapes, strides or dtypes do not match");
        return NULL;
    }
    if (rc < 0) return PyErr_NoMemory();
    return PyLong_FromLong(half_isa(isa, f16));
}

static int float_kind(const Py_buffer *b);

/* rows_dot(x, v, out, pool=0) -> bool
 * out = x v for a C-contiguous float32 matrix x (M x K, native byte order), float32 v (K)
 * and out (M), with the kernel the compiled stage 1 uses for products of at most
 * FUSED_MAX_ROWS rows (f32_rows_ss: the same bits; pool as gemv16's): the general path's
 * z and w where the compiled call would make them so.  False where the CPU lacks the
 * kernel (the caller's BLAS then). */
static PyObject *rows_dot(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 3 || nargs > 4) {
        PyErr_SetString(PyExc_TypeError, "rows_dot(x, v, out, pool=0)");
        return NULL;
    }
    int pool = nargs == 4 ? (int)PyLong_AsLong(args[3]) : 0;
    if (PyErr_Occurred()) return NULL;
    if (!f32_rows_ss_ok()) Py_RETURN_FALSE;
    Py_buffer x, v, out;
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT;
    if (PyObject_GetBuffer(args[0], &x, flags) < 0) return NULL;
    if (PyObject_GetBuffer(args[1], &v, flags) < 0) { PyBuffer_Release(&x); return NULL; }
    if (PyObject_GetBuffer(args[2], &out, flags | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&x); PyBuffer_Release(&v);
        return NULL;
    }
    int ok = x.ndim == 2 && float_kind(&x) == 4 && float_kind(&v) == 4
             && float_kind(&out) == 4 && v.len == x.shape[1] * 4 && out.len == x.shape[0] * 4;
    if (ok && x.shape[0] > 0) {  /* (the products alone: the same bits as with the sums) */
        Py_ssize_t M = x.shape[0], K = x.shape[1];
        Py_BEGIN_ALLOW_THREADS
        f32_rows_ss((const float *)x.buf, K, M, K, (const float *)v.buf, (float *)out.buf,
                    NULL, pool);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&x); PyBuffer_Release(&v); PyBuffer_Release(&out);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "rows_dot: x (M x K), v (K) and out (M) must be "
                                          "C-contiguous native float32");
        return NULL;
    }
    Py_RETURN_TRUE;
}

/* stage 1 on acquired buffers (see stage1): the products, the residual |z + zoff - w| into
 * buf, its order statistics and the sums of squares into st (max |d|, d_(kmed), d_(k9),
 * sum c^2, sum a^2, sum y^2); -1 where a 16-bit product's scratch cannot be had */
static int run_stage1(uintptr_t fn, int ilp64, const Py_buffer *A, const Py_buffer *B,
                      const Py_buffer *C, const Py_buffer *R, const Py_buffer *Y,
                      const Py_buffer *Z, const Py_buffer *W, const Py_buffer *BUF,
                      uint64_t seed_lo, uint64_t seed_hi, Py_ssize_t i0, Py_ssize_t k,
                      Py_ssize_t kmed, Py_ssize_t k9, Py_ssize_t rows, int y_given,
                      double zoff, int f16, int pool, double *st) {
    Py_ssize_t M = A->shape[0], K = A->shape[1], N = C->shape[1];
    Py_ssize_t item = A->itemsize;
    int dbl = item == 8, narrow = item == 2;
    int c16 = narrow && C->itemsize == 2;
    int rc = 0;
    /* every row's norms wanted (few rows): each row's product and sum of squares in one
     * pass over A and over C (f32_rows_ss; half_gemv's blocks), float32 rows by the kernel
     * the general path's z and w are made with there (_fastc.rows_dot) */
    int fused = !dbl && rows > 0 && M <= FUSED_MAX_ROWS && f32_rows_ss_ok();
    double ssq[2 * FUSED_MAX_ROWS];
    double *ssa = fused ? ssq : NULL, *ssc = fused ? ssq + FUSED_MAX_ROWS : NULL;
    /* A y and C r, where the helper's kernels make both, in one parallel region: one fork
     * and join instead of two, both products over every thread where they go to the pool
     * (A and C of one format: where M x (K + N) reaches that format's pool size; a 16-bit A
     * with a float32 C: where either reaches its own), each row's sums the same whichever
     * thread makes them.  Measured right after the product (Guard.check_linear against
     * its floor, 2-core Zen 4, one-off, medians of 150, three A/B runs): bfloat16
     * 16 x 4096 x 14336 0.98-1.10 -> 0.90-0.97 of the floor, 16 x 4096 x 4096 0.94-1.05 ->
     * 0.84-0.87 (the pair was on the calling thread: neither product alone reached the
     * pool's size). */
    int own = f32_rows_ss_ok();
    Py_BEGIN_ALLOW_THREADS
    if (narrow) {
        if (!y_given) {
            balanced_signs(seed_lo, seed_hi, 0, N, R->buf, 0);
            rc |= half_gemv(B->buf, N, K, N, R->buf, Y->buf, -1, f16, pool, NULL);
        }
        struct half_job ja, jc = {0};
        struct f32ss_job jf = {C->buf, N, N, R->buf, W->buf, ssc};
        float sa[HALF_STACK_FLOATS], sc[HALF_STACK_FLOATS];
        if (half_job_init(&ja, A->buf, K, M, K, Y->buf, Z->buf, -1, f16, ssa, sa) < 0
            || (c16 && half_job_init(&jc, C->buf, N, M, N, R->buf, W->buf, -1, f16, ssc,
                                     sc) < 0)) {
            rc = -1;
        } else if (c16 || own) {
            struct range_job jobs[2] = {{half_range, &ja, M, 4},
                                        c16 ? (struct range_job){half_range, &jc, M, 4}
                                            : (struct range_job){f32ss_range, &jf, M, 2}};
            int big = c16 ? half_pooled(pool, M, K + N)
                          : half_pooled(pool, M, K) || f32_pooled(pool, M, N);
            on_pool_jobs(big ? pool : 0, jobs, 2);
        } else {  /* a float32 C without the row kernel: the BLAS gemv */
            on_pool(half_pooled(pool, M, K) ? pool : 0, half_range, &ja, M, 4);
            check_gemv(fn, ilp64, 0, M, N, C->buf, R->buf, W->buf, pool);
        }
        half_job_done(&ja);
        half_job_done(&jc);
    } else {
        if (!y_given) {  /* else r and y = B r are the caller's (a cached weight projection) */
            balanced_signs(seed_lo, seed_hi, 0, N, R->buf, dbl ? 1 : 0);
            check_gemv(fn, ilp64, dbl, K, N, B->buf, R->buf, Y->buf, pool);
        }
        if (!dbl && own) {  /* (fused: with each row's sums of squares) */
            struct f32ss_job ja = {A->buf, K, K, Y->buf, Z->buf, ssa},
                             jc = {C->buf, N, N, R->buf, W->buf, ssc};
            struct range_job jobs[2] = {{f32ss_range, &ja, M, 2}, {f32ss_range, &jc, M, 2}};
            on_pool_jobs(f32_pooled(pool, M, K + N) ? pool : 0, jobs, 2);
        } else {
            check_gemv(fn, ilp64, dbl, M, K, A->buf, Y->buf, Z->buf, pool);
            check_gemv(fn, ilp64, dbl, M, N, C->buf, R->buf, W->buf, pool);
        }
    }
    Py_END_ALLOW_THREADS
    if (rc < 0) return -1;
    double *d = (double *)BUF->buf;
    const float zoff32 = (float)zoff;
    for (Py_ssize_t i = 0; i < M; i++) {
        /* z + zoff in the check's own precision (as numpy adds a Python float to z) */
        double v = dbl ? fabs((((double *)Z->buf)[i] + zoff) - ((double *)W->buf)[i])
                       : fabs((double)(((float *)Z->buf)[i] + zoff32)
                              - (double)((float *)W->buf)[i]);
        d[i] = v;
    }
    order_stats(d, M, kmed, k9, &st[0], &st[1], &st[2]);
    int kind = dbl ? 1 : narrow ? (f16 ? 3 : 2) : 0;
    if (fused) {  /* the largest row's, as block_sumsq gives it */
        st[3] = st[4] = 0.0;
        for (Py_ssize_t i = 0; i < M; i++) {
            double c = ssq[FUSED_MAX_ROWS + i], a = ssq[i];
            if (c > st[3] || c != c) st[3] = c;
            if (a > st[4] || a != a) st[4] = a;
        }
    } else {
        st[3] = block_sumsq(C->buf, c16 ? kind : narrow ? 0 : kind, rows, M, N, i0, k);
        st[4] = block_sumsq(A->buf, kind, rows, M, K, i0, k);
    }
    st[5] = sumsq_n(Y->buf, K, dbl ? 1 : 0);
    return 0;
}

/* stage1(fn, ilp64, a, b, c, seed_lo, seed_hi, r, y, z, w, buf, i0, k, kmed, k9, rows,
 *        y_given, zoff, f16=False, pool=0) -> (max |d|, d_(kmed), d_(k9), sum c^2, sum a^2,
 *        sum y^2)
 * r = the signs of (seed, stream 0); y = B r (y_given: r and y are the caller's), z = A y,
 * w = C r, then screen_stats on z, w, the k rows of C and A from row i0 (rows > 0: all
 * rows, the largest) and y, with d = |z + zoff - w| (zoff: a bias's b . r).
 * float32 / float64: a, b, c, r, y, z, w C-contiguous arrays of one dtype, of shapes
 * (M, K), (K, N), (M, N), (N,), (K,), (M,), (M,), the products through the BLAS gemv at
 * address fn (interface ilp64: see gemv) -- the BLAS the back end itself calls, with the
 * arguments it passes.  16-bit operands: a and b of bfloat16 bits (float16 bits with f16;
 * 2-byte items), c of the same format's bits or float32, r, y, z, w float32; the 16-bit
 * products by half_gemv (pool: 1 the registered OpenMP threads, 2 OpenBLAS's), a float32 c's
 * by the BLAS gemv at fn.  Float32 rows of a product of at most FUSED_MAX_ROWS rows (every
 * row's norms wanted) by f32_rows_ss instead, on the same pool.  buf: float64 scratch of
 * 2 M. */
static PyObject *stage1(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 19 || nargs > 21) {
        PyErr_SetString(PyExc_TypeError, "stage1(fn, ilp64, a, b, c, seed_lo, seed_hi, r, y, z, "
                                         "w, buf, i0, k, kmed, k9, rows, y_given, zoff, "
                                         "f16=False, pool=0)");
        return NULL;
    }
    int f16 = nargs >= 20 ? PyObject_IsTrue(args[19]) : 0;
    int pool = nargs == 21 ? (int)PyLong_AsLong(args[20]) : 0;
    int y_given = PyObject_IsTrue(args[17]);
    double zoff = PyFloat_AsDouble(args[18]);
    uintptr_t fn = (uintptr_t)PyLong_AsUnsignedLongLong(args[0]);
    int ilp64 = (int)PyLong_AsLong(args[1]);
    uint64_t seed_lo = PyLong_AsUnsignedLongLong(args[5]);
    uint64_t seed_hi = PyLong_AsUnsignedLongLong(args[6]);
    Py_ssize_t i0 = PyLong_AsSsize_t(args[12]), k = PyLong_AsSsize_t(args[13]);
    Py_ssize_t kmed = PyLong_AsSsize_t(args[14]), k9 = PyLong_AsSsize_t(args[15]);
    Py_ssize_t rows = PyLong_AsSsize_t(args[16]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer bf[8];
    int got = 0;
    for (int i = 0; i < 8; i++) {
        if (PyObject_GetBuffer(args[i < 3 ? 2 + i : 4 + i], &bf[i],
                               PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND
                               | (i >= 3 && !(y_given && i <= 4) ? PyBUF_WRITABLE : 0)) < 0)
            goto fail;
        got++;
    }
    Py_buffer *A = &bf[0], *B = &bf[1], *C = &bf[2], *R = &bf[3], *Y = &bf[4], *Z = &bf[5],
              *W = &bf[6], *BUF = &bf[7];
    if (A->ndim != 2 || (!y_given && B->ndim != 2) || C->ndim != 2) {
        PyErr_SetString(PyExc_ValueError, "stage1: a, b, c must be 2-D");
        goto fail;
    }
    Py_ssize_t M = A->shape[0], K = A->shape[1], N = C->shape[1];
    Py_ssize_t item = A->itemsize;
    int narrow = item == 2;
    Py_ssize_t vitem = narrow ? 4 : item, citem = C->itemsize;  /* the vectors' items, C's */
    int c16 = narrow && citem == 2;
    if ((!y_given && (B->shape[0] != K || B->shape[1] != N || B->itemsize != item))
        || C->shape[0] != M || (item != 2 && item != 4 && item != 8)
        || (narrow ? citem != 2 && citem != 4 : citem != item) || (!c16 && fn == 0)
        || R->len != N * vitem || Y->len != K * vitem || Z->len != M * vitem
        || W->len != M * vitem || BUF->len < (Py_ssize_t)(2 * M * sizeof(double)) || M == 0
        || kmed < 0 || kmed >= M || k9 >= M || k < 1 || i0 < 0 || i0 + k > M) {
        PyErr_SetString(PyExc_ValueError, fn == 0 && !c16 ? "stage1: no gemv"
                                                          : "stage1: shapes or dtypes do not match");
        goto fail;
    }
    double st[6];
    if (run_stage1(fn, ilp64, A, B, C, R, Y, Z, W, BUF, seed_lo, seed_hi, i0, k, kmed, k9, rows,
                   y_given, zoff, f16, pool, st) < 0) {
        PyErr_NoMemory();
        goto fail;
    }
    double dmax = st[0], dk = st[1], dk9 = st[2], css = st[3], ass = st[4], yss = st[5];
    for (int i = 0; i < got; i++) PyBuffer_Release(&bf[i]);
    return Py_BuildValue("(dddddd)", dmax, dk, dk9, css, ass, yss);
fail:
    for (int i = 0; i < got; i++) PyBuffer_Release(&bf[i]);
    return NULL;
}


/* ---- verify's common call in one call --------------------------------------------------
 * The most frequent call -- one C-contiguous float32 / float64 product of numpy arrays,
 * default options -- took longer in its Python steps than in the check itself, right after
 * a product that evicted them from the caches (the overhead benchmark's cold start: each
 * first statement costs microseconds there).  common(a, b, c) makes it one call: it
 * draws the seed, runs stage 1 with the per-shape plan it keeps (registered once per shape
 * by common_plan, from the same Python functions the other paths use) and decides the
 * screen with the arithmetic of kcontract.freivalds._screen.scale_from_stats, in the same
 * order (the tests hold the two to the same bits). */
struct plan {
    uintptr_t fn;
    int ilp64;
    Py_buffer bf[5]; /* r, y, z, w, buf */
    int got;
    Py_ssize_t M, K, N, item, k, rows, kmed, k9, min_calib, min_k_from_y, half, citem,
        backend, pool;
    double alpha, beta, cap_slack, med, med_q90, floor_fraction, lam;
    PyObject *info; /* what the caller's result reports of the shape (its own object) */
    int busy;       /* its buffers in use by a call that released the GIL */
};

#define PLANS 64
static PyObject *plans[PLANS];     /* capsules of struct plan, the most recently used first */
static struct plan *plan_at[PLANS]; /* their plans */

static void plan_free(PyObject *cap) {
    struct plan *p = PyCapsule_GetPointer(cap, "kcontract.plan");
    if (p == NULL) return;
    for (int i = 0; i < p->got; i++) PyBuffer_Release(&p->bf[i]);
    Py_XDECREF(p->info);
    free(p);
}

/* fresh seeds from the OS, 32 to a read; a forked child reads its own */
static unsigned char entropy[256];
static size_t entropy_pos = sizeof entropy;
static void entropy_forget(void) { entropy_pos = sizeof entropy; }

static int fresh_seed(uint64_t *seed) {
    if (entropy_pos + 8 > sizeof entropy) {
        if (getentropy(entropy, sizeof entropy) != 0) return -1;
        entropy_pos = 0;
    }
    memcpy(seed, entropy + entropy_pos, 8);
    entropy_pos += 8;
    *seed >>= 1; /* 63 bits, as the Python side draws them */
    return 0;
}

/* the caller's seed (a non-negative int below 2^64), or a fresh one where it is None */
static int take_seed(PyObject *given, uint64_t *seed) {
    if (given == Py_None) {
        if (fresh_seed(seed) < 0) {
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        return 0;
    }
    *seed = PyLong_AsUnsignedLongLong(given);
    return PyErr_Occurred() ? -1 : 0;
}

/* common_plan(fn, ilp64, r, y, z, w, buf, M, K, N, item, k, rows, kmed, k9, min_calib,
 *             min_k_from_y, half, citem, backend, pool, alpha, beta, cap_slack, med, med_q90,
 *             floor_fraction, lam, info)
 * registers the plan of one shape and kind (see common; item and citem: the bytes of an
 * operand's and of C's elements; pool: the threads of the helper's own products (16-bit,
 * few-row float32), as gemv16's); info: any object, returned with each of the shape's results */
static PyObject *common_plan(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 29) {
        PyErr_SetString(PyExc_TypeError, "common_plan: 29 arguments");
        return NULL;
    }
    struct plan *p = calloc(1, sizeof *p);
    if (p == NULL) return PyErr_NoMemory();
    p->fn = (uintptr_t)PyLong_AsUnsignedLongLong(args[0]);
    p->ilp64 = (int)PyLong_AsLong(args[1]);
    Py_ssize_t *ints[] = {&p->M, &p->K, &p->N, &p->item, &p->k, &p->rows, &p->kmed, &p->k9,
                          &p->min_calib, &p->min_k_from_y, &p->half, &p->citem, &p->backend,
                          &p->pool};
    for (int i = 0; i < 14; i++) *ints[i] = PyLong_AsSsize_t(args[7 + i]);
    double *dbls[] = {&p->alpha, &p->beta, &p->cap_slack, &p->med, &p->med_q90,
                      &p->floor_fraction, &p->lam};
    for (int i = 0; i < 7; i++) *dbls[i] = PyFloat_AsDouble(args[21 + i]);
    if (PyErr_Occurred()) goto fail;
    for (int i = 0; i < 5; i++) {
        if (PyObject_GetBuffer(args[2 + i], &p->bf[i],
                               PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND | PyBUF_WRITABLE) < 0)
            goto fail;
        p->got++;
    }
    Py_ssize_t it = p->item == 2 ? 4 : p->item; /* the vectors' items */
    int c16 = p->item == 2 && p->citem == 2;
    if ((p->item == 2 ? p->half != 1 && p->half != 2 : p->half != 0)
        || (p->item != 2 && p->item != 4 && p->item != 8)
        || (p->item == 2 ? p->citem != 2 && p->citem != 4 : p->citem != p->item)
        || p->bf[0].len != p->N * it || p->bf[1].len != p->K * it
        || p->bf[2].len != p->M * it || p->bf[3].len != p->M * it
        || p->bf[4].len < (Py_ssize_t)(2 * p->M * sizeof(double)) || p->M < 1 || p->k < 1
        || p->kmed < 0 || p->kmed >= p->M || p->k9 >= p->M || p->k > p->M
        || (p->fn == 0 && !c16)) {
        PyErr_SetString(PyExc_ValueError, "common_plan: sizes do not match");
        goto fail;
    }
    p->info = args[28];
    Py_INCREF(p->info);
    PyObject *cap = PyCapsule_New(p, "kcontract.plan", plan_free);
    if (cap == NULL) {
        Py_DECREF(p->info);
        goto fail;
    }
    Py_XDECREF(plans[PLANS - 1]);
    memmove(plans + 1, plans, (PLANS - 1) * sizeof *plans);
    memmove(plan_at + 1, plan_at, (PLANS - 1) * sizeof *plan_at);
    plans[0] = cap;
    plan_at[0] = p;
    Py_RETURN_NONE;
fail:
    for (int i = 0; i < p->got; i++) PyBuffer_Release(&p->bf[i]);
    free(p);
    return NULL;
}

static int float_kind(const Py_buffer *b) {
    /* 4 float32, 8 float64 in the machine's byte order; 0 anything else -- another byte
     * order too (numpy's '>f4' on a little-endian machine: its bytes read as native
     * floats are other numbers) */
    const char *f = b->format;
    size_t n = f ? strlen(f) : 0;
    if (n == 2) {
        char o = f[0];
        if (!(o == '@' || o == '=' || o == (PY_LITTLE_ENDIAN ? '<' : '>'))) return 0;
    } else if (n != 1) {
        return 0;
    }
    char t = f[n - 1];
    return (b->itemsize == 4 && t == 'f') ? 4 : (b->itemsize == 8 && t == 'd') ? 8 : 0;
}

/* the screen's decision from stage 1's statistics st (see run_stage1) with the arithmetic
 * of kcontract.freivalds._screen.scale_from_stats, in the same order: the noise scale,
 * the threshold t = LAMBDA_SCREEN scale and ratio = max |d| / t; brms: rms_k ||B_k|| where
 * known (< 0: read off sum y^2).  -1 where the statistics do not decide (NaN, or K too
 * small to read rms_k ||B_k|| off y). */
static int screen_verdict(const struct plan *p, const double *st, double brms, double *scale,
                          double *t, double *ratio, int *calibrated) {
    double dmax = st[0], dk = st[1], dk9 = st[2], css = st[3], ass = st[4], yss = st[5];
    if (isnan(dmax)) return -1;
    if (brms < 0) {
        if (p->K < p->min_k_from_y || !isfinite(yss)) return -1;
        brms = sqrt(yss / (double)p->K);
    }
    double cn = isfinite(css) ? sqrt(css / (double)p->k) : 0.0;
    double sn = sqrt(ass / (double)p->k) * brms;
    double cap = p->cap_slack * pow(p->alpha * (cn * cn) + p->beta * (sn * sn), 0.5);
    *calibrated = p->M >= p->min_calib;
    if (!*calibrated) {
        *scale = cap;
    } else {
        double med_d = dk;
        if (p->k9 >= 0) {
            double t9 = dk9 * p->med_q90;
            med_d = t9 > dk ? t9 : dk;
        }
        double q = med_d / p->med, f = p->floor_fraction * cap, v = f > q ? f : q;
        *scale = cap < v ? cap : v;
    }
    *t = p->lam * *scale;
    *ratio = *t > 0 ? dmax / *t : (dmax > 0 ? INFINITY : 0.0);
    return 0;
}

/* the registered plan of one shape and kind (moved to the front), or NULL */
static struct plan *find_plan(Py_ssize_t M, Py_ssize_t K, Py_ssize_t N, Py_ssize_t item,
                              Py_ssize_t half, Py_ssize_t citem, Py_ssize_t backend,
                              PyObject **cap_out) {
    for (int i = 0; i < PLANS && plan_at[i] != NULL; i++) {
        struct plan *q = plan_at[i];
        if (q->M == M && q->K == K && q->N == N && q->item == item && q->half == half
            && q->citem == citem && q->backend == backend) {
            if (i > 0) {
                PyObject *cap = plans[i];
                memmove(plans + 1, plans, (size_t)i * sizeof *plans);
                memmove(plan_at + 1, plan_at, (size_t)i * sizeof *plan_at);
                plans[0] = cap;
                plan_at[0] = q;
            }
            *cap_out = plans[0];
            return q;
        }
    }
    return NULL;
}

/* a C-contiguous M x K matrix at address ptr as a buffer (its shape in shape[2]) */
static void raw_matrix(Py_buffer *b, Py_ssize_t *shape, uintptr_t ptr, Py_ssize_t M,
                       Py_ssize_t K, Py_ssize_t item) {
    memset(b, 0, sizeof *b);
    shape[0] = M;
    shape[1] = K;
    b->buf = (void *)ptr;
    b->len = M * K * item;
    b->itemsize = item;
    b->ndim = 2;
    b->shape = shape;
}

/* what the per-row second look reads of a plan: the cap's constants and ROW_RELIEF_MIN */
struct plan_consts {
    double cap_slack, alpha, beta, relief_min;
};

/* sum_k x_k^2 w_k of a float32 row in sixteen float32 lanes (as the general path's float32
 * rows times float32 weights), summed in float64 */
static double row_wsq32(const float *x, const float *w, Py_ssize_t n) {
    float acc[16] = {0};
    Py_ssize_t j = 0;
    for (; j + 16 <= n; j += 16)
        for (int l = 0; l < 16; l++) acc[l] += x[j + l] * x[j + l] * w[j + l];
    double s = 0.0;
    for (int l = 0; l < 16; l++) s += acc[l];
    for (; j < n; j++) s += (double)x[j] * x[j] * w[j];
    return s;
}

/* The per-row second look from each row's norms (kcontract.freivalds._screen.row_relief
 * with row_noise): sigma_i = CAP_SLACK sqrt(alpha ||C_i||^2 + beta S_i^2) from c2 = ||C_i||^2
 * and s2 = S_i^2 = sum_k a_ik^2 ||B_k||^2 (screen_cap's steps; c2 is overwritten with
 * sigma), rho_i = sigma_i / median sigma (numpy's median: the middle two's mean for even M,
 * selected in tmp[0:M]), and d_i / t divided by rho_i where rho_i >= relief_min.  The
 * largest ratio after it; NaN where a norm is not finite or the median is not positive
 * (no relief: the ratios stand).  rows (or NULL): each row's ratio after it. */
static double relieve(double *c2, const double *s2, double *tmp, const double *d,
                      Py_ssize_t M, double t, const struct plan_consts *k, double *rows) {
    for (Py_ssize_t i = 0; i < M; i++) {
        if (!isfinite(c2[i]) || !isfinite(s2[i])) return NAN;
        double cn = sqrt(c2[i]), sn = sqrt(s2[i]);
        c2[i] = k->cap_slack * sqrt(k->alpha * (cn * cn) + k->beta * (sn * sn));
    }
    memcpy(tmp, c2, (size_t)M * sizeof(double));
    double med = select_k(tmp, M, M / 2);
    if (M % 2 == 0) {
        double lo = tmp[0];
        for (Py_ssize_t i = 1; i < M / 2; i++) if (tmp[i] > lo) lo = tmp[i];
        med = (lo + med) / 2.0;
    }
    if (!(med > 0)) return NAN;
    double worst = 0.0;
    for (Py_ssize_t i = 0; i < M; i++) {
        double r = d[i] > 0 ? d[i] / t : 0.0, rho = c2[i] / med;
        if (rho >= k->relief_min) r /= rho;
        if (rows != NULL) rows[i] = r;
        if (r > worst || r != r) worst = r;
    }
    return worst;
}

/* relieve for one C-contiguous float32 matrix: ||C_i||^2 and sum_k a_ik^2 b2_k (b2:
 * ||B_k||^2) of every row; -1 where scratch cannot be had */
static double relieved_ratio(const float *X, const float *Cm, Py_ssize_t M, Py_ssize_t K,
                             Py_ssize_t N, const float *b2, const double *d, double t,
                             const struct plan_consts *k) {
    double *c2 = malloc((size_t)(3 * M) * sizeof(double));
    if (c2 == NULL) return -1.0;
    double *s2 = c2 + M;
    for (Py_ssize_t i = 0; i < M; i++) {
        c2[i] = sumsq_n(Cm + i * N, N, 0);
        s2[i] = row_wsq32(X + i * K, b2, K);
    }
    double worst = relieve(c2, s2, s2 + M, d, M, t, k, NULL);
    free(c2);
    return worst;
}

/* linear's check (below) from its parsed arguments (b2o: NULL for none), r and y the
 * float32 vectors of N and K at rp and yp (their owner held by the caller) */
static PyObject *linear_run(uintptr_t xp, uintptr_t op, Py_ssize_t M, Py_ssize_t K,
                            Py_ssize_t N, Py_ssize_t half, const float *rp, const float *yp,
                            double brms, double zoff, uint64_t seed, PyObject *b2o,
                            double relief_min) {
    Py_ssize_t item = half ? 2 : 4;
    if (M < 1 || K < 64 || N < 64 || half < 0 || half > 2 || xp == 0 || op == 0
        || rp == NULL || yp == NULL) {
        PyErr_SetString(PyExc_ValueError, "linear: bad sizes or addresses");
        return NULL;
    }
    PyObject *cap;
    struct plan *p = find_plan(M, K, N, item, half, item, 1, &cap);
    if (p == NULL) return Py_BuildValue("(nnnnnnn)", M, K, N, item, half, item, (Py_ssize_t)1);
    if (p->busy) Py_RETURN_NONE; /* another thread's check holds its buffers: verify decides */
    PyObject *out = NULL;
    Py_buffer A, C, rv, yv; /* (r and y as one-row matrices: stage 1 reads their data) */
    Py_ssize_t ash[2], csh[2], rsh[2], ysh[2];
    raw_matrix(&rv, rsh, (uintptr_t)rp, 1, N, 4);
    raw_matrix(&yv, ysh, (uintptr_t)yp, 1, K, 4);
    raw_matrix(&A, ash, xp, M, K, item);
    raw_matrix(&C, csh, op, M, N, item);
    Py_ssize_t i0 = p->rows ? 0 : (Py_ssize_t)(seed % (uint64_t)(M - p->k + 1));
    double st[6];
    Py_INCREF(cap); /* the plan outlives its eviction by another thread meanwhile */
    p->busy = 1;
    int rc = run_stage1(p->fn, p->ilp64, &A, &yv, &C, &rv, &yv, &p->bf[2], &p->bf[3],
                        &p->bf[4], 0, 0, i0, p->k, p->kmed, p->k9, p->rows, 1, zoff, half == 2,
                        (int)p->pool, st);
    /* (busy until the last read of the plan's buffers, at done_cap: a call into Python
     * meanwhile can let another thread in) */
    if (rc < 0) {
        PyErr_NoMemory();
        goto done_cap;
    }
    double scale, t, ratio;
    int calibrated;
    int decided = screen_verdict(p, st, brms, &scale, &t, &ratio, &calibrated) == 0;
    if (decided && ratio > 1.0 && isfinite(ratio) && b2o != NULL && half == 0 && calibrated
        && t > 0) {
        Py_buffer bv;
        if (get(b2o, &bv, 0) == 0) {
            if (bv.len == K * 4 && bv.itemsize == 4) {
                struct plan_consts k = {p->cap_slack, p->alpha, p->beta, relief_min};
                ratio = relieved_ratio((const float *)A.buf, (const float *)C.buf, M, K, N,
                                       (const float *)bv.buf, (const double *)p->bf[4].buf, t,
                                       &k);
                if (ratio < 0) PyErr_NoMemory();
            } else {
                PyErr_SetString(PyExc_ValueError, "linear: b2 must be float32 of K");
            }
            PyBuffer_Release(&bv);
        }
        if (PyErr_Occurred()) goto done_cap;
    }
    if (!decided || !(ratio <= 1.0)) {
        out = Py_None;
        Py_INCREF(out);
    } else {
        out = PyFloat_FromDouble(ratio);
    }
done_cap:
    p->busy = 0;
    Py_DECREF(cap);
    return out;
}

/* linear(x_ptr, out_ptr, M, K, N, half, r, y, brms, zoff, seed, b2=None, relief_min=0) -> screen ratio, None, or
 * (M, K, N, item, half, citem, backend)
 * The guard's check of a linear product out = x W^T (+ bias) with a cached projection
 * y = W^T r: x (M x K) and out (M x N) C-contiguous CPU tensors given by their data
 * addresses (the caller holds them and has checked their layout: one call into torch for
 * each instead of a numpy view's), float32 (half 0) or bfloat16 / float16 bits (half 1 /
 * 2, out in the same format); r, y float32 arrays; brms: rms_k ||W_k|| (None: read off y);
 * zoff: a bias's b . r.  Stage 1 and the screen of common with the given projection (the
 * plan of shape M x K x N, backend 1); the ratio where every row clears the screen, None
 * where one does not or the statistics do not decide, the plan's key where the shape has
 * none yet (register it, then call again).  b2 (float32 ||W_k||^2 for each of the K
 * columns of W, float32 products only): where the screen does not clear and the screen
 * was calibrated, the per-row second look (relieved_ratio) decides: its ratio where every
 * row clears its own noise, else None. */
static PyObject *linear(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 11 && nargs != 13) {
        PyErr_SetString(PyExc_TypeError, "linear(x_ptr, out_ptr, M, K, N, half, r, y, brms, "
                                         "zoff, seed, b2=None, relief_min=0)");
        return NULL;
    }
    PyObject *b2o = nargs == 13 && args[11] != Py_None ? args[11] : NULL;
    double relief_min = nargs == 13 ? PyFloat_AsDouble(args[12]) : 0.0;
    uintptr_t xp = (uintptr_t)PyLong_AsUnsignedLongLong(args[0]);
    uintptr_t op = (uintptr_t)PyLong_AsUnsignedLongLong(args[1]);
    Py_ssize_t M = PyLong_AsSsize_t(args[2]), K = PyLong_AsSsize_t(args[3]);
    Py_ssize_t N = PyLong_AsSsize_t(args[4]), half = PyLong_AsSsize_t(args[5]);
    double brms = args[8] == Py_None ? -1.0 : PyFloat_AsDouble(args[8]);
    double zoff = PyFloat_AsDouble(args[9]);
    uint64_t seed = PyLong_AsUnsignedLongLong(args[10]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer rv, yv;
    if (get(args[6], &rv, 0) < 0) return NULL;
    if (get(args[7], &yv, 0) < 0) {
        PyBuffer_Release(&rv);
        return NULL;
    }
    PyObject *out = NULL;
    if (rv.len != N * 4 || yv.len != K * 4 || rv.itemsize != 4 || yv.itemsize != 4)
        PyErr_SetString(PyExc_ValueError, "linear: r and y must be float32 of N and K");
    else
        out = linear_run(xp, op, M, K, N, half, rv.buf, yv.buf, brms, zoff, seed, b2o,
                         relief_min);
    PyBuffer_Release(&rv);
    PyBuffer_Release(&yv);
    return out;
}

/* the passing result of a common call, where kcontract.freivalds._core registered its
 * class (set_passed): that class's object, made as _core._passing makes one -- one slot,
 * _v, holding (threshold, scale, ratio, calibrated, shape, formats, seed, false alarm,
 * backend, True), and seconds 0 -- without a Python frame between the check and its
 * caller (verify's front, or _core._common) */
static PyObject *passed_type, *passed_make, *passed_pfa, *str_v, *str_seconds;

static PyObject *passed_result(uint64_t seed, double ratio, double scale, double t,
                               int calibrated, PyObject *info) {
    if (!PyTuple_CheckExact(info) || PyTuple_GET_SIZE(info) != 3) {
        PyErr_SetString(PyExc_TypeError, "a plan's info must be (shape, formats, backend)");
        return NULL;
    }
    PyObject *res = PyObject_CallOneArg(passed_make, passed_type);
    if (res == NULL) return NULL;
    PyObject *v = Py_BuildValue("(dddOOOKOOO)", t, scale, ratio,
                                calibrated ? Py_True : Py_False, PyTuple_GET_ITEM(info, 0),
                                PyTuple_GET_ITEM(info, 1), (unsigned long long)seed,
                                passed_pfa, PyTuple_GET_ITEM(info, 2), Py_True);
    PyObject *zero = v == NULL ? NULL : PyFloat_FromDouble(0.0);
    int bad = zero == NULL || PyObject_SetAttr(res, str_v, v) < 0
              || PyObject_SetAttr(res, str_seconds, zero) < 0;
    Py_XDECREF(v);
    Py_XDECREF(zero);
    if (bad) Py_CLEAR(res);
    return res;
}

/* set_passed(cls, make, false_alarm): the passing result's class (_core._Passed), how one
 * is made (object.__new__) and the default false-alarm probability it reports */
static PyObject *set_passed(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyType_Check(args[0]) || !PyCallable_Check(args[1])
        || !PyFloat_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "set_passed(cls, make, false_alarm)");
        return NULL;
    }
    Py_XSETREF(passed_type, Py_NewRef(args[0]));
    Py_XSETREF(passed_make, Py_NewRef(args[1]));
    Py_XSETREF(passed_pfa, Py_NewRef(args[2]));
    Py_RETURN_NONE;
}

/* common's check of A B = C (buffers of checked kinds and shapes): see common */
static PyObject *common_run(const Py_buffer *A, const Py_buffer *B, const Py_buffer *C,
                            Py_ssize_t item, Py_ssize_t half, Py_ssize_t citem,
                            Py_ssize_t backend, PyObject *given) {
    Py_ssize_t M = A->shape[0], K = A->shape[1], N = B->shape[1];
    PyObject *cap;
    struct plan *p = find_plan(M, K, N, item, half, citem, backend, &cap);
    if (p == NULL) return Py_BuildValue("(nnnnnnn)", M, K, N, item, half, citem, backend);
    if (p->busy) Py_RETURN_NONE; /* another thread's check holds its buffers: the Python path */
    uint64_t seed;
    if (take_seed(given, &seed) < 0) return NULL;
    Py_ssize_t i0 = p->rows ? 0 : (Py_ssize_t)(seed % (uint64_t)(M - p->k + 1));
    double st[6];
    Py_INCREF(cap); /* the plan outlives its eviction by another thread meanwhile */
    p->busy = 1;
    int rc = run_stage1(p->fn, p->ilp64, A, B, C, &p->bf[0], &p->bf[1], &p->bf[2], &p->bf[3],
                        &p->bf[4], seed, 0, i0, p->k, p->kmed, p->k9, p->rows, 0, 0.0,
                        half == 2, (int)p->pool, st);
    p->busy = 0;
    PyObject *out = NULL;
    if (rc < 0) {
        out = PyErr_NoMemory();
        goto done;
    }
    double scale, t, ratio;
    int calibrated;
    if (screen_verdict(p, st, -1.0, &scale, &t, &ratio, &calibrated) < 0)
        out = Py_BuildValue("(KOddOO)", (unsigned long long)seed, Py_None, 0.0, 0.0, Py_False,
                            p->info);
    else if (ratio <= 1.0 && passed_type != NULL)
        out = passed_result(seed, ratio, scale, t, calibrated, p->info);
    else
        out = Py_BuildValue("(KdddOO)", (unsigned long long)seed, ratio, scale, t,
                            calibrated ? Py_True : Py_False, p->info);
done:
    Py_DECREF(cap);
    return out;
}

/* common_ptr(a_ptr, b_ptr, c_ptr, M, K, N, half, citem, backend): common for C-contiguous
 * matrices given by their data addresses (CPU tensors whose layout and formats the caller
 * has checked and holds: one call into torch each instead of a numpy view's); half 0:
 * float32 (citem 4) or float64 (citem 8) operands and C; half 1 / 2: bfloat16 / float16
 * bits, C of theirs (citem 2) or float32 (citem 4) */
static PyObject *common_ptr(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 9 && nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "common_ptr(a_ptr, b_ptr, c_ptr, M, K, N, half, citem, "
                                         "backend, seed=None)");
        return NULL;
    }
    uintptr_t ptr[3];
    for (int i = 0; i < 3; i++) ptr[i] = (uintptr_t)PyLong_AsUnsignedLongLong(args[i]);
    Py_ssize_t v[6];
    for (int i = 0; i < 6; i++) v[i] = PyLong_AsSsize_t(args[3 + i]);
    if (PyErr_Occurred()) return NULL;
    Py_ssize_t M = v[0], K = v[1], N = v[2], half = v[3], citem = v[4];
    Py_ssize_t item = half ? 2 : citem;
    if (M < 1 || K < 64 || N < 64 || half < 0 || half > 2 || !ptr[0] || !ptr[1] || !ptr[2]
        || (half ? citem != 2 && citem != 4 : citem != 4 && citem != 8))
        Py_RETURN_NONE;
    Py_buffer A, B, C;
    Py_ssize_t ash[2], bsh[2], csh[2];
    raw_matrix(&A, ash, ptr[0], M, K, item);
    raw_matrix(&B, bsh, ptr[1], K, N, item);
    raw_matrix(&C, csh, ptr[2], M, N, citem);
    return common_run(&A, &B, &C, item, half, citem, v[5], nargs == 10 ? args[9] : Py_None);
}

/* common(a, b, c, half=0, backend=0, seed=None) -> None (not this path: not 2-D C-contiguous arrays of
 * matching shapes with K, N >= 64: half 0, float32 / float64 arrays of one dtype; half 1
 * or 2, a and b of bfloat16 or float16 (2-byte items) and c of theirs or float32 -- with
 * half, buffers are taken without their format (numpy cannot describe bfloat16 in one):
 * the caller has checked the dtypes, and a 4-byte c is float32),
 * (M, K, N, item, half, citem, backend) (no plan for the shape and kind: register one,
 * then call again), the passing result (set_passed's class: the screen passed the
 * product), or (seed, ratio, scale, threshold, calibrated, info): the screen did not pass
 * it (ratio > 1, NaN, or undecided: ratio None; ratio <= 1 only where no class is
 * registered), the caller checks it again with this seed.  seed: the caller's (an int
 * below 2^64), or None for a fresh one from OS entropy. */
static PyObject *common_of(PyObject *const *args, Py_ssize_t half, Py_ssize_t backend,
                           PyObject *given);

static PyObject *common(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 3 || nargs > 6) {
        PyErr_SetString(PyExc_TypeError, "common(a, b, c, half=0, backend=0, seed=None)");
        return NULL;
    }
    Py_ssize_t half = nargs >= 4 ? PyLong_AsSsize_t(args[3]) : 0;
    Py_ssize_t backend = nargs >= 5 ? PyLong_AsSsize_t(args[4]) : 0;
    PyObject *given = nargs == 6 ? args[5] : Py_None;
    if (PyErr_Occurred()) return NULL;
    return common_of(args, half, backend, given);
}

/* common's work on args[0..3) (a, b, c) */
static PyObject *common_of(PyObject *const *args, Py_ssize_t half, Py_ssize_t backend,
                           PyObject *given) {
    Py_buffer bf[3];
    int got = 0;
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_ND | (half ? 0 : PyBUF_FORMAT);
    for (int i = 0; i < 3; i++) {
        if (PyObject_GetBuffer(args[i], &bf[i], flags) < 0) {
            PyErr_Clear();
            for (int j = 0; j < got; j++) PyBuffer_Release(&bf[j]);
            Py_RETURN_NONE;
        }
        got++;
    }
    PyObject *out = NULL;
    const Py_buffer *A = &bf[0], *B = &bf[1], *C = &bf[2];
    Py_ssize_t item = half ? 2 : float_kind(A), citem = half ? C->itemsize : item;
    int kinds_ok = half ? (half == 1 || half == 2) && A->itemsize == 2 && B->itemsize == 2
                              && (citem == 2 || citem == 4)
                        : item != 0 && float_kind(B) == item && float_kind(C) == item;
    if (A->ndim != 2 || B->ndim != 2 || C->ndim != 2 || !kinds_ok
        || B->shape[0] != A->shape[1] || C->shape[0] != A->shape[0]
        || C->shape[1] != B->shape[1] || A->shape[0] < 1 || A->shape[1] < 64
        || B->shape[1] < 64) {
        out = Py_None;
        Py_INCREF(out);
        goto done;
    }
    out = common_run(A, B, C, item, half, citem, backend, given);
done:
    for (int j = 0; j < got; j++) PyBuffer_Release(&bf[j]);
    return out;
}

/* ---- verify's front: its common call without Python between ---------------------------
 * kcontract.freivalds.verify, called as verify(a, b, c): three numpy arrays and no option
 * (most calls, and the overhead benchmark's).  For those the front does what verify and
 * _core._common do in Python -- the dtypes by identity, the compiled common call, whose
 * passing result it returns -- and hands every other call, and every product the call
 * does not pass, to the Python verify (given: `general`): a product whose screen did not
 * pass it goes on there with the call's seed (keyword `_resume`: when the call started,
 * by `clock`), as after _core._common.  The Python between cost 4.3 us of a 32 us check
 * of a 512^3 bfloat16 product right after it (medians of six runs of 61; the bare
 * compiled call 27.8 us).  Its instances keep a __dict__, for functools' update_wrapper:
 * name, docstring and __wrapped__ (the signature) are the Python verify's. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;
    PyObject *general; /* the Python verify */
    PyObject *ndarray; /* numpy.ndarray */
    PyObject *bf16, *f16, *f32; /* the dtypes */
    PyObject *clock;   /* time.perf_counter */
    PyObject *ns;      /* the Python verify's module namespace */
    PyObject *watch;   /* ((name, value), ...): the functions the front shortens, as made */
} Front;

static PyObject *str_dtype, *str_seed, *str_resume, *str_qualname;

/* the dtype object of a numpy array (borrowed through the caller's reference: the array
 * holds it); NULL, error cleared, where it has none */
static PyObject *dtype_of(PyObject *x) {
    PyObject *dt = PyObject_GetAttr(x, str_dtype);
    if (dt == NULL) {
        PyErr_Clear();
        return NULL;
    }
    Py_DECREF(dt);
    return dt;
}

static PyObject *front_general(Front *f, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames) {
    return PyObject_Vectorcall(f->general, args, nargsf, kwnames);
}

static PyObject *front_call(PyObject *self, PyObject *const *args, size_t nargsf,
                            PyObject *kwnames) {
    Front *f = (Front *)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 3 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0))
        return front_general(f, args, nargsf, kwnames);
    /* where any function the front shortens was replaced (instrumented, turned off) since,
     * the Python verify's calls are the ones made */
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(f->watch); i++) {
        PyObject *nv = PyTuple_GET_ITEM(f->watch, i);
        PyObject *now = PyDict_GetItemWithError(f->ns, PyTuple_GET_ITEM(nv, 0));
        if (now != PyTuple_GET_ITEM(nv, 1)) {
            if (now == NULL && PyErr_Occurred()) return NULL;
            return front_general(f, args, nargsf, kwnames);
        }
    }
    PyObject *a = args[0], *b = args[1], *c = args[2], *nd = f->ndarray;
    if ((PyObject *)Py_TYPE(a) != nd || (PyObject *)Py_TYPE(b) != nd
        || (PyObject *)Py_TYPE(c) != nd)
        return front_general(f, args, nargsf, kwnames);
    PyObject *dt = dtype_of(a);
    Py_ssize_t half = dt == NULL ? -1 : dt == f->bf16 ? 1 : dt == f->f16 ? 2 : 0;
    if (half < 0) return front_general(f, args, nargsf, kwnames);
    if (half) {
        /* (b of a's format, c of it or float32: the compiled call reads 16-bit buffers
         * without their format, as _core._common) */
        PyObject *db = dtype_of(b), *dc = dtype_of(c);
        if (db != dt || (dc != dt && dc != f->f32))
            return front_general(f, args, nargsf, kwnames);
    }
    PyObject *t0 = PyObject_CallNoArgs(f->clock);
    if (t0 == NULL) return NULL;
    PyObject *out = common_of(args, half, 0, Py_None);
    if (out == NULL) {
        Py_DECREF(t0);
        return NULL;
    }
    if (passed_type != NULL && (PyObject *)Py_TYPE(out) == passed_type) {
        PyObject *t1 = PyObject_CallNoArgs(f->clock);
        PyObject *secs = t1 == NULL ? NULL : PyFloat_FromDouble(PyFloat_AsDouble(t1)
                                                                - PyFloat_AsDouble(t0));
        Py_XDECREF(t1);
        int bad = secs == NULL || PyObject_SetAttr(out, str_seconds, secs) < 0;
        Py_XDECREF(secs);
        Py_DECREF(t0);
        if (bad) Py_CLEAR(out);
        return out;
    }
    if (PyTuple_CheckExact(out) && PyTuple_GET_SIZE(out) == 6) {
        /* the screen did not pass it: the Python verify goes on with this seed */
        PyObject *kw = PyTuple_Pack(2, str_seed, str_resume), *res = NULL;
        if (kw != NULL) {
            PyObject *call[5] = {a, b, c, PyTuple_GET_ITEM(out, 0), t0};
            res = PyObject_Vectorcall(f->general, call, 3, kw);
            Py_DECREF(kw);
        }
        Py_DECREF(out);
        Py_DECREF(t0);
        return res;
    }
    /* not the front's (no plan yet, or not a product the call takes): the Python verify,
     * from the start (a call that needs a plan makes it there) */
    Py_DECREF(out);
    Py_DECREF(t0);
    return front_general(f, args, nargsf, kwnames);
}

static int front_traverse(PyObject *self, visitproc visit, void *arg) {
    Front *f = (Front *)self;
    Py_VISIT(f->dict);
    Py_VISIT(f->general);
    Py_VISIT(f->ndarray);
    Py_VISIT(f->bf16);
    Py_VISIT(f->f16);
    Py_VISIT(f->f32);
    Py_VISIT(f->clock);
    Py_VISIT(f->ns);
    Py_VISIT(f->watch);
    return 0;
}

static int front_clear(PyObject *self) {
    Front *f = (Front *)self;
    Py_CLEAR(f->dict);
    Py_CLEAR(f->general);
    Py_CLEAR(f->ndarray);
    Py_CLEAR(f->bf16);
    Py_CLEAR(f->f16);
    Py_CLEAR(f->f32);
    Py_CLEAR(f->clock);
    Py_CLEAR(f->ns);
    Py_CLEAR(f->watch);
    return 0;
}

static void front_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    front_clear(self);
    Py_TYPE(self)->tp_free(self);
}

/* Front(general, ndarray, bfloat16, float16, float32, clock, namespace, names): names,
 * those of namespace's functions the front shortens (their values now are watched) */
static PyObject *front_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *o[8];
    if (kw != NULL && PyDict_GET_SIZE(kw) > 0) goto usage;
    if (!PyArg_UnpackTuple(args, "Front", 8, 8, &o[0], &o[1], &o[2], &o[3], &o[4], &o[5],
                           &o[6], &o[7]))
        return NULL;
    if (!PyCallable_Check(o[0]) || !PyType_Check(o[1]) || !PyCallable_Check(o[5])
        || !PyDict_CheckExact(o[6]) || !PyTuple_CheckExact(o[7]))
        goto usage;
    Py_ssize_t nw = PyTuple_GET_SIZE(o[7]);
    PyObject *watch = PyTuple_New(nw);
    if (watch == NULL) return NULL;
    for (Py_ssize_t i = 0; i < nw; i++) {
        PyObject *name = PyTuple_GET_ITEM(o[7], i);
        PyObject *now = PyUnicode_CheckExact(name) ? PyDict_GetItemWithError(o[6], name) : NULL;
        PyObject *nv = now == NULL ? NULL : PyTuple_Pack(2, name, now);
        if (nv == NULL) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_KeyError, "Front: no %R in the namespace", name);
            Py_DECREF(watch);
            return NULL;
        }
        PyTuple_SET_ITEM(watch, i, nv);
    }
    Front *f = (Front *)type->tp_alloc(type, 0);
    if (f == NULL) {
        Py_DECREF(watch);
        return NULL;
    }
    f->vectorcall = front_call;
    PyObject **slots[] = {&f->general, &f->ndarray, &f->bf16, &f->f16, &f->f32, &f->clock,
                          &f->ns};
    for (int i = 0; i < 7; i++) *slots[i] = Py_NewRef(o[i]);
    f->watch = watch;
    return (PyObject *)f;
usage:
    PyErr_SetString(PyExc_TypeError, "Front(general, ndarray, bfloat16, float16, float32, "
                                     "clock, namespace, names)");
    return NULL;
}

/* pickled by name, as the function it fronts */
static PyObject *front_reduce(PyObject *self, PyObject *unused) {
    return PyObject_GetAttr(self, str_qualname);
}

static PyMethodDef front_methods[] = {
    {"__reduce__", front_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef front_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject FrontType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kcontract.freivalds._fastc.Front",
    .tp_basicsize = sizeof(Front),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "verify's front: its common call compiled, every other call to the Python "
              "verify (see the source)",
    .tp_new = front_new,
    .tp_dealloc = front_dealloc,
    .tp_traverse = front_traverse,
    .tp_clear = front_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Front, vectorcall),
    .tp_dictoffset = offsetof(Front, dict),
    .tp_methods = front_methods,
    .tp_getset = front_getset,
};

/* the layout of the last two axes of a strided buffer: 0 row-major, 1 column-major (each
 * with its leading dimension in elements), -1 neither */
static int layout(const Py_buffer *b, Py_ssize_t *ld) {
    Py_ssize_t it = b->itemsize, n = b->ndim;
    Py_ssize_t rows = b->shape[n - 2], cols = b->shape[n - 1];
    Py_ssize_t rs = b->strides[n - 2], cs = b->strides[n - 1];
    if (cs == it && rs > 0 && rs % it == 0 && rs / it >= cols) { *ld = rs / it; return 0; }
    if (rs == it && cs > 0 && cs % it == 0 && cs / it >= rows) { *ld = cs / it; return 1; }
    return -1;
}

/* float64 sum of squares of rows i0 .. i0 + k - 1 of a rows x cols matrix (float32 or
 * float64) laid out as `layout` says */
static double strided_block_sumsq(const char *X, int dbl, int trans, Py_ssize_t ld,
                                  Py_ssize_t cols, Py_ssize_t i0, Py_ssize_t k) {
    Py_ssize_t it = dbl ? 8 : 4;
    int kind = dbl ? 1 : 0;
    if (!trans) {
        if (ld == cols) return sumsq_n(X + i0 * ld * it, k * cols, kind);
        double s = 0.0;
        for (Py_ssize_t i = i0; i < i0 + k; i++) s += sumsq_n(X + i * ld * it, cols, kind);
        return s;
    }
    double s = 0.0;  /* column-major: the k rows' elements of each column are adjacent */
    for (Py_ssize_t j = 0; j < cols; j++) s += sumsq_n(X + (j * ld + i0) * it, k, kind);
    return s;
}

/* byte offset of matrix t (flat index, last batch axis fastest) in a strided batch */
static Py_ssize_t item_offset(const Py_buffer *b, Py_ssize_t t) {
    Py_ssize_t off = 0;
    for (Py_ssize_t j = b->ndim - 3; j >= 0; j--) {
        off += (t % b->shape[j]) * b->strides[j];
        t /= b->shape[j];
    }
    return off;
}

/* the sizes of a batch a (..., M, K), b (..., K, N), c (..., M, N): one batch shape, one
 * element size (float32 or float64), no empty dimension; 0 where they do not fit */
static int batch_dims(const Py_buffer *A, const Py_buffer *B, const Py_buffer *C,
                      Py_ssize_t *items, Py_ssize_t *M, Py_ssize_t *K, Py_ssize_t *N) {
    Py_ssize_t nd = A->ndim, item = A->itemsize;
    if (nd < 3 || nd > 64 || B->ndim != nd || C->ndim != nd || (item != 4 && item != 8)
        || B->itemsize != item || C->itemsize != item) return 0;
    *items = 1;
    for (Py_ssize_t j = 0; j < nd - 2; j++) {
        if (A->shape[j] != B->shape[j] || A->shape[j] != C->shape[j]) return 0;
        *items *= A->shape[j];
    }
    *M = A->shape[nd - 2]; *K = A->shape[nd - 1]; *N = B->shape[nd - 1];
    return B->shape[nd - 2] == *K && C->shape[nd - 2] == *M && C->shape[nd - 1] == *N
           && *M > 0 && *K > 0 && *N > 0 && *items > 0;
}

/* out[i] = sum_j x_ij^2 wt_j (wt NULL: 1) over the rows of a rows x cols matrix laid out
 * as `layout` says, in float64 */
static void row_sums(const char *X, int kind, int trans, Py_ssize_t ld, Py_ssize_t rows,
                     Py_ssize_t cols, const double *wt, double *out) {
    if (!trans) {
        Py_ssize_t it = kind_size(kind);
        for (Py_ssize_t i = 0; i < rows; i++) {
            if (!wt) { out[i] = sumsq_n(X + i * ld * it, cols, kind); continue; }
            double s = 0.0;
            for (Py_ssize_t j = 0; j < cols; j++) {
                double v = elem(X, kind, i * ld + j);
                s += v * v * wt[j];
            }
            out[i] = s;
        }
        return;
    }
    for (Py_ssize_t i = 0; i < rows; i++) out[i] = 0.0;  /* column by column */
    for (Py_ssize_t j = 0; j < cols; j++) {
        double w = wt ? wt[j] : 1.0;
        for (Py_ssize_t i = 0; i < rows; i++) {
            double v = elem(X, kind, j * ld + i);
            out[i] += v * v * w;
        }
    }
}

/* batches whose matrices ran on the registered pool (see run_stage1_batch) */
static unsigned long long pool_batches;

/* whether the itemsize bytes at base + each native int64 of offs equal those of want (peek
 * with expected bytes); -1 (no error set) for malformed arguments */
static int same_bytes(uintptr_t base, PyObject *offs, PyObject *item_o, PyObject *want) {
    Py_ssize_t item = PyLong_AsSsize_t(item_o);
    if (item == -1 && PyErr_Occurred()) PyErr_Clear();
    if (base == 0 || item < 1 || item > 16 || !PyBytes_Check(offs) || !PyBytes_Check(want)
        || PyBytes_GET_SIZE(offs) % 8
        || PyBytes_GET_SIZE(want) != PyBytes_GET_SIZE(offs) / 8 * item)
        return -1;
    Py_ssize_t n = PyBytes_GET_SIZE(offs) / 8;
    const char *ob = PyBytes_AS_STRING(offs), *wb = PyBytes_AS_STRING(want);
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t off;
        memcpy(&off, ob + 8 * i, 8);
        if (memcmp((const char *)base + off, wb + i * item, (size_t)item)) return 0;
    }
    return 1;
}

/* peek(address, offsets, itemsize[, expected]) -> bytes, or whether they equal expected:
 * the itemsize bytes at address + offsets[i] for each native int64 in the bytes object
 * offsets (a few sampled elements of a CPU tensor whose address, shape and strides the
 * caller has checked: the guard's fingerprint of a cached weight's values) */
static PyObject *peek(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 && nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "peek(address, offsets, itemsize[, expected])");
        return NULL;
    }
    uintptr_t base = (uintptr_t)PyLong_AsUnsignedLongLong(args[0]);
    Py_ssize_t item = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred()) return NULL;
    if (base == 0 || item < 1 || item > 16 || !PyBytes_Check(args[1])
        || PyBytes_GET_SIZE(args[1]) % 8
        || (nargs == 4 && (!PyBytes_Check(args[3]) || PyBytes_GET_SIZE(args[3])
                           != PyBytes_GET_SIZE(args[1]) / 8 * item))) {
        PyErr_SetString(PyExc_ValueError, "peek: a null address, a bad item size, or "
                                          "offsets / expected bytes of the wrong size");
        return NULL;
    }
    if (nargs == 4) return PyBool_FromLong(same_bytes(base, args[1], args[2], args[3]) == 1);
    Py_ssize_t n = PyBytes_GET_SIZE(args[1]) / 8;
    const char *ob = PyBytes_AS_STRING(args[1]);
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * item);
    if (out == NULL) return NULL;
    char *dst = PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t off;
        memcpy(&off, ob + 8 * i, 8);
        memcpy(dst + i * item, (const char *)base + off, (size_t)item);
    }
    return out;
}

static PyObject *str_version, *str_data_ptr;
/* torch's TensorBase._version (its getset descriptor) and TensorBase.data_ptr (its method
 * descriptor), registered by set_tensor_access: called directly, without looking the
 * names up through the tensor's type (a Parameter's three classes, from cold caches right
 * after a product: 7 us for w._version against 5 for a call that does nothing, medians of
 * 300); NULL: looked up */
static PyObject *version_get, *data_ptr_fn;
/* torch.Tensor (set_tensor_access): the type whose products a deferring guard records in C */
static PyObject *tensor_type;

/* a tensor's version counter (new reference; NULL with the error set) */
static PyObject *tensor_version(PyObject *t) {
    if (version_get != NULL)
        return Py_TYPE(version_get)->tp_descr_get(version_get, t, (PyObject *)Py_TYPE(t));
    return PyObject_GetAttr(t, str_version);
}

/* a tensor's data_ptr() (new reference; NULL with the error set) */
static PyObject *tensor_data_ptr(PyObject *t) {
    if (data_ptr_fn != NULL) return PyObject_Vectorcall(data_ptr_fn, &t, 1, NULL);
    return PyObject_CallMethodNoArgs(t, str_data_ptr);
}

/* set_tensor_access(version_descriptor, data_ptr_descriptor[, tensor_type]): see
 * version_get; (None, None) forgets them; tensor_type: see tensor_type (None: none) */
static PyObject *set_tensor_access(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if ((nargs != 2 && nargs != 3) || (args[0] == Py_None) != (args[1] == Py_None)
        || (args[0] != Py_None && (Py_TYPE(args[0])->tp_descr_get == NULL
                                   || !PyCallable_Check(args[1])))
        || (nargs == 3 && args[2] != Py_None && !PyType_Check(args[2]))) {
        PyErr_SetString(PyExc_TypeError, "set_tensor_access(version getset descriptor, "
                                         "data_ptr method descriptor[, torch.Tensor]), or "
                                         "(None, None[, None])");
        return NULL;
    }
    Py_CLEAR(version_get);
    Py_CLEAR(data_ptr_fn);
    if (args[0] != Py_None) {
        version_get = Py_NewRef(args[0]);
        data_ptr_fn = Py_NewRef(args[1]);
    }
    if (nargs == 3) { /* (two arguments: the tensor type as it was) */
        Py_CLEAR(tensor_type);
        if (args[2] != Py_None) tensor_type = Py_NewRef(args[2]);
    }
    Py_RETURN_NONE;
}

/* whether a tensor's version counter is ver and its data address addr (1 or 0; -1 with
 * the error torch raised) */
static int same_memory(PyObject *t, PyObject *ver, PyObject *addr) {
    PyObject *v = tensor_version(t);
    if (v == NULL) return -1;
    int eq = PyObject_RichCompareBool(v, ver, Py_EQ);
    Py_DECREF(v);
    if (eq != 1) return eq;
    PyObject *a = tensor_data_ptr(t);
    if (a == NULL) return -1;
    eq = PyObject_RichCompareBool(a, addr, Py_EQ);
    Py_DECREF(a);
    return eq;
}

/* whether the weak reference ref refers to o */
static int refers_to(PyObject *ref, PyObject *o) {
    if (!PyWeakref_Check(ref)) return 0;
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *t;
    if (PyWeakref_GetRef(ref, &t) < 0) {
        PyErr_Clear();
        return 0;
    }
    int is = t == o;
    Py_XDECREF(t);
    return is;
#else
    return PyWeakref_GetObject(ref) == o;
#endif
}

/* a tensor's data address (0 with the error set) */
static uintptr_t data_address(PyObject *t) {
    PyObject *a = tensor_data_ptr(t);
    if (a == NULL) return 0;
    uintptr_t p = (uintptr_t)PyLong_AsUnsignedLongLong(a);
    Py_DECREF(a);
    return PyErr_Occurred() ? 0 : p;
}

/* the layout of the guard's remembered lean check (kcontract.freivalds._guard._Lean) */
enum { L_WREF, L_VERSION, L_ADDRESS, L_OFFS, L_ITEM, L_BYTES, L_BIAS, L_GUARDS, L_K, L_N,
       L_HALF, L_R, L_Y, L_BRMS, L_B2, L_ZOFF, L_NAME, L_RP, L_YP, L_SIZE };

static PyObject *lean_entry(PyObject *e, PyObject *x, PyObject *out, PyObject *w,
                            PyObject *bias, uint64_t seed, double relief_min) {
#define E(i) PyTuple_GET_ITEM(e, i)
    if (!refers_to(E(L_WREF), w)) Py_RETURN_NONE;
    PyObject *bs = E(L_BIAS);
    Py_ssize_t nt = 3;
    if (bias == Py_None) {
        if (bs != Py_None) Py_RETURN_NONE;
    } else {
        if (!PyTuple_Check(bs) || PyTuple_GET_SIZE(bs) != 6
            || !refers_to(PyTuple_GET_ITEM(bs, 0), bias))
            Py_RETURN_NONE;
        nt = 4;
    }
    /* the tensors' types, dispatch keys, dtypes, sizes and strides: one of the remembered
     * TensorGuards (each (check, M, (M, K, N))) */
    PyObject *gs = E(L_GUARDS), *hit = NULL;
    if (!PyTuple_Check(gs)) Py_RETURN_NONE;
    PyObject *argv[4] = {x, out, w, bias};
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(gs) && hit == NULL; i++) {
        PyObject *g = PyTuple_GET_ITEM(gs, i);
        if (!PyTuple_Check(g) || PyTuple_GET_SIZE(g) != 3) Py_RETURN_NONE;
        PyObject *r = PyObject_Vectorcall(PyTuple_GET_ITEM(g, 0), argv, (size_t)nt, NULL);
        if (r == NULL) return NULL;
        if (r == Py_True) hit = g;
        Py_DECREF(r);
    }
    if (hit == NULL) Py_RETURN_NONE;
    /* the weight's and the bias's version counters, addresses and sampled bytes */
    int ok = same_memory(w, E(L_VERSION), E(L_ADDRESS));
    if (ok < 0) return NULL;
    uintptr_t wa = ok ? (uintptr_t)PyLong_AsUnsignedLongLong(E(L_ADDRESS)) : 0;
    if (PyErr_Occurred()) return NULL;
    if (!ok || same_bytes(wa, E(L_OFFS), E(L_ITEM), E(L_BYTES)) != 1) Py_RETURN_NONE;
    if (nt == 4) {
        ok = same_memory(bias, PyTuple_GET_ITEM(bs, 1), PyTuple_GET_ITEM(bs, 2));
        if (ok < 0) return NULL;
        uintptr_t ba = ok ? (uintptr_t)PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(bs, 2)) : 0;
        if (PyErr_Occurred()) return NULL;
        if (!ok || same_bytes(ba, PyTuple_GET_ITEM(bs, 3), PyTuple_GET_ITEM(bs, 4),
                              PyTuple_GET_ITEM(bs, 5)) != 1)
            Py_RETURN_NONE;
    }
    uintptr_t xp = data_address(x);
    if (xp == 0) return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    uintptr_t op = data_address(out);
    if (op == 0) return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    Py_ssize_t M = PyLong_AsSsize_t(PyTuple_GET_ITEM(hit, 1));
    Py_ssize_t K = PyLong_AsSsize_t(E(L_K)), N = PyLong_AsSsize_t(E(L_N));
    Py_ssize_t half = PyLong_AsSsize_t(E(L_HALF));
    double brms = E(L_BRMS) == Py_None ? -1.0 : PyFloat_AsDouble(E(L_BRMS));
    double zoff = PyFloat_AsDouble(E(L_ZOFF));
    if (PyErr_Occurred()) return NULL;
    /* r's and y's addresses, kept beside them (the entry holds both arrays; their lengths
     * N and K, float32, checked when it was made): no buffer requests */
    const float *rp = PyLong_AsVoidPtr(E(L_RP)), *yp = PyLong_AsVoidPtr(E(L_YP));
    if (PyErr_Occurred()) return NULL;
    PyObject *ratio = linear_run(xp, op, M, K, N, half, rp, yp, brms, zoff, seed,
                                 E(L_B2) == Py_None ? NULL : E(L_B2), relief_min);
    if (ratio == NULL) return NULL;
    if (!PyFloat_Check(ratio)) { /* a row beyond the screen (None): False; no plan: None */
        int beyond = ratio == Py_None;
        Py_DECREF(ratio);
        if (beyond) Py_RETURN_FALSE;
        Py_RETURN_NONE;
    }
    PyObject *sd = PyLong_FromUnsignedLongLong(seed);
    PyObject *res = sd == NULL ? NULL : PyTuple_Pack(4, ratio, sd, PyTuple_GET_ITEM(hit, 2),
                                                     E(L_NAME));
    Py_DECREF(ratio);
    Py_XDECREF(sd);
    return res;
#undef E
}

/* lean's work after its arguments: the entry fast[id(w)] (fast: a dict) and lean_entry */
static PyObject *lean_lookup(PyObject *fast, PyObject *x, PyObject *out, PyObject *w,
                             PyObject *bias, uint64_t seed, double relief_min) {
    PyObject *key = PyLong_FromVoidPtr(w); /* id(w) */
    if (key == NULL) return NULL;
    PyObject *e = PyDict_GetItemWithError(fast, key);
    Py_DECREF(key);
    if (e == NULL) return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) != L_SIZE) {
        PyErr_SetString(PyExc_TypeError, "lean: not a remembered check");
        return NULL;
    }
    Py_INCREF(e); /* (held while torch's calls run: another thread may replace it) */
    PyObject *res = lean_entry(e, x, out, w, bias, seed, relief_min);
    Py_DECREF(e);
    return res;
}

/* lean(fast, x, out, w, bias, seed, relief_min) -> (ratio, seed, (M, K, N), name), False
 * or None
 * The guard's lean linear check repeated for a weight it has passed before, without a call
 * into Python between its steps: the entry fast[id(w)] (a _Lean tuple, see L_*) must refer
 * to w (and to bias, or have none where bias is None); one of its TensorGuards' checks
 * must pass (x, out, w[, bias]); w's (and bias's) version counter and data address must be
 * the remembered ones and their sampled bytes unchanged; then linear's check of x and out
 * at their addresses with the remembered projection.  None where any of this does not
 * hold (the caller goes on to the check that reads each property), False where the check
 * was made and a row is beyond the screen or its statistics do not decide (verify decides);
 * an error where torch raises one. */
static PyObject *lean(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7 || !PyDict_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError,
                        "lean(fast: dict, x, out, w, bias, seed, relief_min)");
        return NULL;
    }
    uint64_t seed = PyLong_AsUnsignedLongLong(args[5]);
    double relief_min = PyFloat_AsDouble(args[6]);
    if (PyErr_Occurred()) return NULL;
    return lean_lookup(args[0], args[1], args[2], args[3], args[4], seed, relief_min);
}

/* ---- the guard's books and its common call, compiled: GuardCore ----
 * The base class of kcontract.freivalds.Guard (where the helper is there): the fields its
 * common call needs -- the sampling and deferral flags, the remembered checks' dicts, the
 * seed sequence's position, the last passing check, the tally of passing checks not yet
 * counted in its stats, the cache hits left until fresh signs -- in the object itself, and
 * check_linear and _linear_now, which make the remembered check (lean_lookup) and keep
 * those books without a Python frame or an attribute lookup; every other call goes to the
 * guard's Python methods (_check_linear_py, _linear_now_py, _linear_rest), looked up on
 * the guard at that call.  Right after a product each attribute lookup and each object
 * made or freed costs cache misses: measured right after a 1 x 4096 x 4096 float32
 * product (2-core Zen 4, timestamps in the call, medians of 300), the bookkeeping through
 * the guard's attributes took ~6 us of a 26-29 us check, and the two Python frames before
 * that another 1-5 us (A/B). */

typedef struct {
    PyObject_HEAD
    double sample;
    char defer, cache_weights, has_room, last_c;
    uint64_t seed_at;
    long long n[2], hits, room;
    double sec[2];
    PyObject *fast, *fast_mm; /* id(weight) -> _Lean, for N x K and K x N weights */
    PyObject *last_obj;       /* the last result where Python set it (last_c == 0) */
    double last_ratio;        /* else the last passing remembered check's: its ratio, */
    uint64_t last_seed;       /* seed, (M, K, N) and operands' format name */
    PyObject *last_shape, *last_name;
    PyObject *pending;        /* deferred linear checks: (x, w, out, bias, versions, tr) */
    long long pending_bytes, defer_bytes;
} GuardCore;

static PyTypeObject GuardCoreType;

/* the guard's Python methods the compiled ones hand calls to */
static PyObject *gs_check_py, *gs_now_py, *gs_rest_py, *gs_new_signs;
/* the clock the tally's seconds are read off (time.perf_counter), and the seed sequence's
 * step and mask (a power of two less one, below 2^63) and ROW_RELIEF_MIN (guard_consts) */
static PyObject *g_clock, *gs_nbytes;
static uint64_t g_step, g_mask;
static double g_relief;
/* a deferring guard checks a product of more than this many bytes of x and out at once
 * (_guard.DEFER_PRODUCT_BYTES); -1: every call of a deferring guard goes to Python */
static long long g_defer_product = -1;

/* a passing check in the tally: 1 where the cache hits reach the room (fresh signs due) */
static int core_tally(GuardCore *c, int transposed, double seconds) {
    int i = transposed ? 0 : 1;
    c->n[i] += 1;
    c->sec[i] += seconds;
    c->hits += 1;
    return c->has_room && c->hits == c->room;
}

/* _linear_now(x, w, out, bias, transposed) of the guard c */
static PyObject *core_now(GuardCore *c, PyObject *x, PyObject *w, PyObject *out,
                          PyObject *bias, PyObject *tr) {
    PyObject *g = (PyObject *)c;
    if (g_clock == NULL) { /* (a GuardCore made outside kcontract.freivalds._guard) */
        PyErr_SetString(PyExc_RuntimeError, "GuardCore: guard_consts has not been called");
        return NULL;
    }
    int transposed = PyObject_IsTrue(tr);
    if (transposed < 0) return NULL;
    PyObject *t0 = PyObject_CallNoArgs(g_clock);
    if (t0 == NULL) return NULL;
    /* (no weight cache: False, verify decides) */
    PyObject *last = Py_NewRef(c->cache_weights ? Py_None : Py_False), *res = NULL;
    PyObject *fast = transposed ? c->fast : c->fast_mm;
    if (c->cache_weights && fast != NULL && PyDict_Check(fast) && PyDict_GET_SIZE(fast) > 0) {
        uint64_t seed = (c->seed_at + g_step) & g_mask; /* (as Python's ints: below 2^63) */
        Py_INCREF(fast); /* (held while torch's calls run) */
        Py_SETREF(last, lean_lookup(fast, x, out, w, bias, seed, g_relief));
        Py_DECREF(fast);
        if (last == NULL) goto done;
        if (PyTuple_Check(last)) { /* made, and passed: (ratio, seed, (M, K, N), name) */
            double ratio = PyFloat_AsDouble(PyTuple_GET_ITEM(last, 0));
            PyObject *now = ratio == -1.0 && PyErr_Occurred() ? NULL
                                                               : PyObject_CallNoArgs(g_clock);
            if (now == NULL) goto done;
            double dt = PyFloat_AsDouble(now) - PyFloat_AsDouble(t0);
            Py_DECREF(now);
            if (PyErr_Occurred()) goto done;
            c->seed_at = seed;
            c->last_ratio = ratio;
            c->last_seed = seed;
            Py_XSETREF(c->last_shape, Py_NewRef(PyTuple_GET_ITEM(last, 2)));
            Py_XSETREF(c->last_name, Py_NewRef(PyTuple_GET_ITEM(last, 3)));
            c->last_c = 1;
            Py_CLEAR(c->last_obj);
            res = core_tally(c, transposed, dt) ? PyObject_CallMethodNoArgs(g, gs_new_signs)
                                                : Py_NewRef(Py_None);
            if (res != NULL && res != Py_None) Py_SETREF(res, Py_NewRef(Py_None));
            goto done;
        }
    }
    PyObject *a[8] = {g, x, w, out, bias, tr, last, t0};
    res = PyObject_VectorcallMethod(gs_rest_py, a, 8, NULL);
done:
    Py_XDECREF(last);
    Py_DECREF(t0);
    return res;
}

/* a deferring guard's product recorded as _check_linear_py records it (x, w, out, bias,
 * their version counters, tr): 1; 0 where it is not to be deferred (an inference tensor:
 * no version counter); -1 with an error */
static int core_defer(GuardCore *c, PyObject *x, PyObject *w, PyObject *out, PyObject *bias,
                      PyObject *tr, long long size) {
    PyObject *v[4] = {NULL, NULL, NULL, NULL}, *t[4] = {x, w, out, bias};
    int rc = -1;
    for (int i = 0; i < (bias == Py_None ? 3 : 4); i++) {
        if ((v[i] = tensor_version(t[i])) == NULL) {
            if (PyErr_ExceptionMatches(PyExc_RuntimeError)) {
                PyErr_Clear();
                rc = 0;
            }
            goto done;
        }
    }
    PyObject *ver = PyTuple_Pack(4, v[0], v[1], v[2], v[3] == NULL ? Py_None : v[3]);
    PyObject *item = ver == NULL ? NULL : PyTuple_Pack(6, x, w, out, bias, ver, tr);
    Py_XDECREF(ver);
    if (item != NULL && PyList_Append(c->pending, item) == 0) {
        c->pending_bytes += size;
        rc = 1;
    }
    Py_XDECREF(item);
done:
    for (int i = 0; i < 4; i++) Py_XDECREF(v[i]);
    return rc;
}

/* x.nbytes + out.nbytes; -1 (no error set) where either is not a count of bytes */
static long long product_bytes(PyObject *x, PyObject *out) {
    long long size = 0;
    PyObject *t[2] = {x, out};
    for (int i = 0; i < 2; i++) {
        PyObject *nb = PyObject_GetAttr(t[i], gs_nbytes);
        long long b = nb == NULL ? -1 : PyLong_AsLongLong(nb);
        Py_XDECREF(nb);
        if (b < 0) {
            PyErr_Clear();
            return -1;
        }
        size += b;
    }
    return size;
}

/* check_linear(self, x, weight, out, bias=None, *, transposed=True) */
static PyObject *core_check_linear(PyObject *g, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames) {
    GuardCore *c = (GuardCore *)g;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nk = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if ((nargs == 3 || nargs == 4)
        && (nk == 0 || (nk == 1 && PyUnicode_CompareWithASCIIString(
                                       PyTuple_GET_ITEM(kwnames, 0), "transposed") == 0))) {
        /* (sampled or without a weight cache: the Python method) */
        int now = c->sample >= 1.0 && c->cache_weights;
        PyObject *bias = nargs == 4 ? args[3] : Py_None, *tr = nk ? args[nargs] : Py_True;
        if (now && c->defer) {
            /* a deferring guard's product: recorded, or (too large to defer, a plain
             * tensor's only, beyond defer_bytes, an inference tensor's) checked at once,
             * as _check_linear_py does (anything unlike a tensor, or torch's type not yet
             * registered: there) */
            long long size = g_defer_product >= 0 && tensor_type != NULL
                                 ? product_bytes(args[0], args[2]) : -1;
            now = size >= 0;
            if (now && size <= g_defer_product && (PyObject *)Py_TYPE(args[2]) == tensor_type
                && c->pending != NULL && PyList_CheckExact(c->pending)
                && c->pending_bytes + size <= c->defer_bytes) {
                int r = core_defer(c, args[0], args[1], args[2], bias, tr, size);
                if (r < 0) return NULL;
                if (r > 0) Py_RETURN_NONE;
            }
        }
        if (now) return core_now(c, args[0], args[1], args[2], bias, tr);
    }
    /* the Python method, with the arguments as given */
    PyObject *small[8], **a = small;
    Py_ssize_t total = nargs + nk + 1;
    if (total > 8 && (a = PyMem_Malloc(total * sizeof(PyObject *))) == NULL)
        return PyErr_NoMemory();
    a[0] = g;
    for (Py_ssize_t i = 0; i < nargs + nk; i++) a[i + 1] = args[i];
    PyObject *res = PyObject_VectorcallMethod(gs_check_py, a, (size_t)nargs + 1, kwnames);
    if (a != small) PyMem_Free(a);
    return res;
}

/* _linear_now(self, x, weight, out, bias, transposed=True) */
static PyObject *core_linear_now(PyObject *g, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs == 4 || nargs == 5)
        return core_now((GuardCore *)g, args[0], args[1], args[2], args[3],
                        nargs == 5 ? args[4] : Py_True);
    PyObject *a[8] = {g};
    if (nargs > 7) nargs = 7; /* (a wrong call: the Python method's error) */
    for (Py_ssize_t i = 0; i < nargs; i++) a[i + 1] = args[i];
    return PyObject_VectorcallMethod(gs_now_py, a, (size_t)nargs + 1, NULL);
}

/* _tally_add(transposed, seconds) -> whether fresh signs are due */
static PyObject *core_tally_add(PyObject *g, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_tally_add(transposed, seconds)");
        return NULL;
    }
    int tr = PyObject_IsTrue(args[0]);
    double s = PyFloat_AsDouble(args[1]);
    if (tr < 0 || (s == -1.0 && PyErr_Occurred())) return NULL;
    return PyBool_FromLong(core_tally((GuardCore *)g, tr, s));
}

static PyObject *core_tally_clear(PyObject *g, PyObject *unused) {
    GuardCore *c = (GuardCore *)g;
    c->n[0] = c->n[1] = c->hits = 0;
    c->sec[0] = c->sec[1] = 0.0;
    Py_RETURN_NONE;
}

static PyObject *core_get_tally(PyObject *g, void *closure) {
    GuardCore *c = (GuardCore *)g;
    return Py_BuildValue("[LdLdL]", c->n[0], c->sec[0], c->n[1], c->sec[1], c->hits);
}

static PyObject *core_get_sample(PyObject *g, void *closure) {
    return PyFloat_FromDouble(((GuardCore *)g)->sample);
}

static int core_set_sample(PyObject *g, PyObject *v, void *closure) {
    double s = v == NULL ? -1.0 : PyFloat_AsDouble(v);
    if (v == NULL) PyErr_SetString(PyExc_AttributeError, "sample cannot be deleted");
    if (PyErr_Occurred()) return -1;
    ((GuardCore *)g)->sample = s;
    return 0;
}

/* the flags defer and cache_weights (closure: the field's offset) */
static PyObject *core_get_flag(PyObject *g, void *closure) {
    return PyBool_FromLong(*((char *)g + (size_t)closure));
}

static int core_set_flag(PyObject *g, PyObject *v, void *closure) {
    int f = v == NULL ? -1 : PyObject_IsTrue(v);
    if (v == NULL) PyErr_SetString(PyExc_AttributeError, "a guard's flag cannot be deleted");
    if (f < 0) return -1;
    *((char *)g + (size_t)closure) = (char)f;
    return 0;
}

static PyObject *core_get_seed_at(PyObject *g, void *closure) {
    return PyLong_FromUnsignedLongLong(((GuardCore *)g)->seed_at);
}

static int core_set_seed_at(PyObject *g, PyObject *v, void *closure) {
    uint64_t s = v == NULL ? 0 : PyLong_AsUnsignedLongLong(v);
    if (v == NULL) PyErr_SetString(PyExc_AttributeError, "_seed_at cannot be deleted");
    if (PyErr_Occurred()) return -1;
    if (s > g_mask && g_mask) {
        PyErr_SetString(PyExc_ValueError, "_seed_at beyond the seed sequence's mask");
        return -1;
    }
    ((GuardCore *)g)->seed_at = s;
    return 0;
}

static PyObject *core_get_last(PyObject *g, void *closure) {
    GuardCore *c = (GuardCore *)g;
    if (c->last_c)
        return Py_BuildValue("(dKOO)", c->last_ratio, (unsigned long long)c->last_seed,
                             c->last_shape, c->last_name);
    return Py_NewRef(c->last_obj == NULL ? Py_None : c->last_obj);
}

static int core_set_last(PyObject *g, PyObject *v, void *closure) {
    GuardCore *c = (GuardCore *)g;
    Py_XSETREF(c->last_obj, Py_XNewRef(v));
    c->last_c = 0;
    return 0;
}

static PyObject *core_get_room(PyObject *g, void *closure) {
    GuardCore *c = (GuardCore *)g;
    return c->has_room ? PyLong_FromLongLong(c->room) : Py_NewRef(Py_None);
}

static int core_set_room(PyObject *g, PyObject *v, void *closure) {
    GuardCore *c = (GuardCore *)g;
    if (v == NULL || v == Py_None) {
        c->has_room = 0;
        return 0;
    }
    long long r = PyLong_AsLongLong(v);
    if (r == -1 && PyErr_Occurred()) return -1;
    c->room = r;
    c->has_room = 1;
    return 0;
}

/* _fast, _fast_mm (dicts) and _pending (a list) (closure: the field's offset) */
static PyObject *core_get_held(PyObject *g, void *closure) {
    PyObject *d = *(PyObject **)((char *)g + (size_t)closure);
    return Py_NewRef(d == NULL ? Py_None : d);
}

static int core_set_held(PyObject *g, PyObject *v, void *closure) {
    int list = (size_t)closure == offsetof(GuardCore, pending);
    if (v == NULL || (list ? !PyList_CheckExact(v) : !PyDict_Check(v))) {
        PyErr_SetString(PyExc_TypeError, list ? "a guard's deferred checks must be a list"
                                              : "a guard's remembered checks must be a dict");
        return -1;
    }
    Py_XSETREF(*(PyObject **)((char *)g + (size_t)closure), Py_NewRef(v));
    return 0;
}

/* _pending_bytes and defer_bytes (closure: the field's offset) */
static PyObject *core_get_bytes(PyObject *g, void *closure) {
    return PyLong_FromLongLong(*(long long *)((char *)g + (size_t)closure));
}

static int core_set_bytes(PyObject *g, PyObject *v, void *closure) {
    long long b = v == NULL ? -1 : PyLong_AsLongLong(v);
    if (v == NULL) PyErr_SetString(PyExc_AttributeError, "a guard's byte count cannot be deleted");
    if (b == -1 && PyErr_Occurred()) return -1;
    *(long long *)((char *)g + (size_t)closure) = b;
    return 0;
}

static PyGetSetDef core_getset[] = {
    {"_pending", core_get_held, core_set_held,
     "deferred linear checks: (x, w, out, bias, versions, transposed)",
     (void *)offsetof(GuardCore, pending)},
    {"_pending_bytes", core_get_bytes, core_set_bytes, "bytes of the deferred products",
     (void *)offsetof(GuardCore, pending_bytes)},
    {"defer_bytes", core_get_bytes, core_set_bytes, "the most bytes of deferred products",
     (void *)offsetof(GuardCore, defer_bytes)},
    {"sample", core_get_sample, core_set_sample, "fraction of calls checked", NULL},
    {"defer", core_get_flag, core_set_flag, "whether linear checks are deferred",
     (void *)offsetof(GuardCore, defer)},
    {"cache_weights", core_get_flag, core_set_flag, "whether weight projections are cached",
     (void *)offsetof(GuardCore, cache_weights)},
    {"_seed_at", core_get_seed_at, core_set_seed_at, "the lean checks' seed sequence", NULL},
    {"_last", core_get_last, core_set_last,
     "the last result, or what the lean linear check knows of it", NULL},
    {"_lean_room", core_get_room, core_set_room,
     "cache hits, past stats', until fresh signs (None: never)", NULL},
    {"_tally", core_get_tally, NULL,
     "passing remembered checks not yet in stats: [linear's checks, seconds, addmm's checks, "
     "seconds, cache hits]", NULL},
    {"_fast", core_get_held, core_set_held, "id(weight) -> _Lean, N x K weights",
     (void *)offsetof(GuardCore, fast)},
    {"_fast_mm", core_get_held, core_set_held, "id(weight) -> _Lean, K x N weights",
     (void *)offsetof(GuardCore, fast_mm)},
    {NULL},
};

static PyMethodDef core_methods[] = {
    {"check_linear", (PyCFunction)(void (*)(void))core_check_linear,
     METH_FASTCALL | METH_KEYWORDS,
     "check_linear($self, x, weight, out, bias=None, *, transposed=True)\n--\n\n"
     "Check one F.linear product out = x @ weight.T (+ bias), as the guard does for each "
     "one it intercepts (transposed=False: out = x @ weight (+ bias), a K x N weight).  "
     "The common call (a weight whose check the guard remembers) is compiled; every other "
     "one is Guard._check_linear_py's, whose docstring says the rest."},
    {"_linear_now", (PyCFunction)(void (*)(void))core_linear_now, METH_FASTCALL,
     "_linear_now($self, x, weight, out, bias, transposed=True)\n--\n\n"
     "check_linear after sampling and deferral, compiled on the remembered check's path "
     "(see Guard._linear_now_py)."},
    {"_tally_add", (PyCFunction)(void (*)(void))core_tally_add, METH_FASTCALL,
     "_tally_add(transposed, seconds) -> whether fresh signs are due: a passing lean check "
     "in the tally"},
    {"_tally_clear", core_tally_clear, METH_NOARGS, "_tally_clear(): the tally emptied"},
    {NULL},
};

static int core_traverse(PyObject *g, visitproc visit, void *arg) {
    GuardCore *c = (GuardCore *)g;
    Py_VISIT(c->fast);
    Py_VISIT(c->fast_mm);
    Py_VISIT(c->last_obj);
    Py_VISIT(c->last_shape);
    Py_VISIT(c->last_name);
    Py_VISIT(c->pending);
    return 0;
}

static int core_clear(PyObject *g) {
    GuardCore *c = (GuardCore *)g;
    Py_CLEAR(c->fast);
    Py_CLEAR(c->fast_mm);
    Py_CLEAR(c->last_obj);
    Py_CLEAR(c->last_shape);
    Py_CLEAR(c->last_name);
    Py_CLEAR(c->pending);
    return 0;
}

static void core_dealloc(PyObject *g) {
    PyObject_GC_UnTrack(g);
    core_clear(g);
    Py_TYPE(g)->tp_free(g);
}

static PyObject *core_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    GuardCore *c = (GuardCore *)type->tp_alloc(type, 0);
    if (c == NULL) return NULL;
    c->sample = 1.0;
    c->cache_weights = 1;
    c->fast = PyDict_New();
    c->fast_mm = PyDict_New();
    c->pending = PyList_New(0);
    if (c->fast == NULL || c->fast_mm == NULL || c->pending == NULL) {
        Py_DECREF(c);
        return NULL;
    }
    return (PyObject *)c;
}

static PyTypeObject GuardCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kcontract.freivalds._fastc.GuardCore",
    .tp_basicsize = sizeof(GuardCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The books of a guard's common call and that call, compiled (see the source); "
              "the base class of kcontract.freivalds.Guard.",
    .tp_new = core_new,
    .tp_dealloc = core_dealloc,
    .tp_traverse = core_traverse,
    .tp_clear = core_clear,
    .tp_methods = core_methods,
    .tp_getset = core_getset,
};

/* guard_consts(clock, step, mask, relief_min, defer_product_bytes): what GuardCore's calls
 * need of _guard */
static PyObject *guard_consts(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !PyCallable_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError,
                        "guard_consts(clock, step, mask, relief_min, defer_product_bytes)");
        return NULL;
    }
    uint64_t step = PyLong_AsUnsignedLongLong(args[1]), mask = PyLong_AsUnsignedLongLong(args[2]);
    double relief = PyFloat_AsDouble(args[3]);
    long long defer_product = PyLong_AsLongLong(args[4]);
    if (PyErr_Occurred()) return NULL;
    if (mask >> 63 || (mask & (mask + 1)) || step > mask) {
        PyErr_SetString(PyExc_ValueError, "guard_consts: the mask must be 2^k - 1, k < 64, "
                                          "and the step at most the mask");
        return NULL;
    }
    Py_XSETREF(g_clock, Py_NewRef(args[0]));
    g_step = step;
    g_mask = mask;
    g_relief = relief;
    g_defer_product = defer_product < 0 ? -1 : defer_product;
    Py_RETURN_NONE;
}

static PyObject *pool_batches_py(PyObject *self, PyObject *unused) {
    return PyLong_FromUnsignedLongLong(__atomic_load_n(&pool_batches, __ATOMIC_RELAXED));
}

/* stage1_batch's work: the matrices t0 .. t1 - 1 of the batch (tmp: M doubles of scratch) */
struct batch_job {
    uintptr_t fn;
    int ilp64, dbl, kind, ta, tb, tc, failed, own; /* own: f32_gemv_avx512's products */
    const Py_buffer *A, *B, *C;
    Py_ssize_t lda, ldb, ldc, items, M, K, N, i0, k, kmed, k9, item;
    const void *r;
    char *y, *z, *w;
    double *d, *st;
};

static void batch_items(const struct batch_job *j, Py_ssize_t t0, Py_ssize_t t1, double *tmp) {
    Py_ssize_t M = j->M, K = j->K, N = j->N, item = j->item;
    for (Py_ssize_t t = t0; t < t1; t++) {
        const char *a = (const char *)j->A->buf + item_offset(j->A, t);
        const char *b = (const char *)j->B->buf + item_offset(j->B, t);
        const char *c = (const char *)j->C->buf + item_offset(j->C, t);
        char *y = j->y + t * K * item, *z = j->z + t * M * item, *w = j->w + t * M * item;
#ifdef KC_X86
        if (j->own) {
            f32_gemv_avx512(j->tb, K, N, j->ldb, (const float *)b, j->r, (float *)y);
            f32_gemv_avx512(j->ta, M, K, j->lda, (const float *)a, (const float *)y,
                            (float *)z);
            f32_gemv_avx512(j->tc, M, N, j->ldc, (const float *)c, j->r, (float *)w);
        } else
#endif
        {
            gemv_t(j->fn, j->ilp64, j->dbl, j->tb, K, N, j->ldb, b, j->r, y);
            gemv_t(j->fn, j->ilp64, j->dbl, j->ta, M, K, j->lda, a, y, z);
            gemv_t(j->fn, j->ilp64, j->dbl, j->tc, M, N, j->ldc, c, j->r, w);
        }
        double *dt = j->d + t * M;
        for (Py_ssize_t i = 0; i < M; i++) {
            double v = j->dbl ? fabs(((double *)z)[i] - ((double *)w)[i])
                              : fabs((double)((float *)z)[i] - (double)((float *)w)[i]);
            dt[i] = v;
        }
        double *s = j->st + 6 * t;
        order_stats_in(dt, tmp, M, j->kmed, j->k9, &s[0], &s[1], &s[2]);
        s[3] = strided_block_sumsq(c, j->dbl, j->tc, j->ldc, N, j->i0, j->k);
        s[4] = strided_block_sumsq(a, j->dbl, j->ta, j->lda, K, j->i0, j->k);
        s[5] = sumsq_n(y, K, j->kind);
    }
}

/* one pool thread's share of the batch: a contiguous run of whole matrices, each matrix's
 * products made on that thread alone (MKL inside a parallel region runs sequentially: for
 * row-major matrices the numbers its threads make on the calling thread, for column-major
 * ones not always -- so the general path's stage 1 takes this route too, see
 * _screen.batch_screen) */
static void batch_range(const void *p, Py_ssize_t t0, Py_ssize_t t1);

static void batch_part(void *p) {
    struct batch_job *j = p;
    Py_ssize_t t = pool_thread_num(), nt = pool_num_threads();
    Py_ssize_t per = (j->items + nt - 1) / nt, t0 = t * per, t1 = t0 + per;
    if (t1 > j->items) t1 = j->items;
    if (t0 < t1) batch_range(j, t0, t1);
}

/* the matrices t0 .. t1 - 1 on this thread, with scratch of its own (none to be had: the
 * job's failed flag, and the caller runs the batch again on its thread) */
static void batch_range(const void *p, Py_ssize_t t0, Py_ssize_t t1) {
    struct batch_job *j = (struct batch_job *)p;
    double stack[1024], *tmp = j->M <= 1024 ? stack : malloc((size_t)j->M * sizeof(double));
    if (tmp == NULL) {
        __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    batch_items(j, t0, t1, tmp);
    if (tmp != stack) free(tmp);
}

/* the largest matrices (elements of A, B and C together) whose batch stage 1 always makes
 * its float32 products with f32_gemv_avx512 rather than numpy's BLAS; up to
 * OWN_BATCH_LARGE_ELEMS where the batch has a matrix for each of OpenBLAS's threads.
 * Measured on 2 cores (bench_freivalds_overhead.py --attention B x H x T x D, the
 * helper's products against numpy's BLAS, of the floor): 32 x 256x256x256 0.63 / 1.06,
 * 16 x 512x128x512 0.50 / 1.03, 8 x 512x512x512 0.80 / 1.14, 8 x 1024x128x1024 0.80 /
 * 1.09 -- but 8 x 1024x1024x1024 (3.1 M elements) 1.21 / 1.06 and 3 x 1024x1024x1024
 * 1.49 / 1.00: beyond that, numpy's BLAS (each product on its threads) */
#define OWN_BATCH_MAX_ELEMS (1 << 17)
#define OWN_BATCH_LARGE_ELEMS (1 << 21)

/* the threads on_pool(2, ...) shares work among (1: none registered) */
static int blas_pool_threads(void) {
    if (blas_pthread == NULL) return 1;
    int nt = blas_threads();
    return nt > BLAS_POOL_MAX ? BLAS_POOL_MAX : nt < 1 ? 1 : nt;
}

/* whether a float32 batch of numpy arrays (items matrices of M x K times K x N) has the
 * helper's own products (see above) */
static int own_batch(Py_ssize_t items, Py_ssize_t M, Py_ssize_t K, Py_ssize_t N) {
    if (items < 2 || !f32_rows_ss_ok()) return 0;
    Py_ssize_t elems = M * K + K * N + M * N;
    int nt = blas_pool_threads();
    return elems <= OWN_BATCH_MAX_ELEMS
           || (elems <= OWN_BATCH_LARGE_ELEMS && nt >= 2 && items >= nt);
}

/* own_batch(items, M, K, N) -> bool: the rule above, for the tests */
static PyObject *own_gemv_py(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "own_gemv(M, K)");
        return NULL;
    }
    Py_ssize_t M = PyLong_AsSsize_t(args[0]), K = PyLong_AsSsize_t(args[1]);
    if (PyErr_Occurred()) return NULL;
    return PyBool_FromLong(own_gemv(M, K));
}

static PyObject *own_batch_py(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "own_batch(items, M, K, N)");
        return NULL;
    }
    Py_ssize_t v[4];
    for (int i = 0; i < 4; i++) {
        v[i] = PyLong_AsSsize_t(args[i]);
        if (PyErr_Occurred()) return NULL;
    }
    return PyBool_FromLong(own_batch(v[0], v[1], v[2], v[3]));
}

/* stage1_batch's work on acquired buffers (the GIL released inside).  Where the products
 * are MKL's (ilp64 2: torch's own sgemv_ / dgemv_) and torch's OpenMP pool is registered,
 * the matrices are shared out among its threads: one fork for the batch instead of one
 * (or none) per product, each product on one thread. */
static void run_stage1_batch(uintptr_t fn, int ilp64, const Py_buffer *A, const Py_buffer *B,
                             const Py_buffer *C, int ta, Py_ssize_t lda, int tb,
                             Py_ssize_t ldb, int tc, Py_ssize_t ldc, Py_ssize_t items,
                             Py_ssize_t M, Py_ssize_t K, Py_ssize_t N, uint64_t seed_lo,
                             uint64_t seed_hi, void *rbuf, void *ybuf, void *zbuf, void *wbuf,
                             double *d, double *tmp, Py_ssize_t i0, Py_ssize_t k,
                             Py_ssize_t kmed, Py_ssize_t k9, double *st) {
    Py_ssize_t item = A->itemsize;
    int dbl = item == 8;
    struct batch_job job = {fn, ilp64, dbl, dbl ? 1 : 0, ta, tb, tc, 0, 0, A, B, C, lda, ldb,
                            ldc, items, M, K, N, i0, k, kmed, k9, item, rbuf, ybuf, zbuf,
                            wbuf, d, st};
    Py_BEGIN_ALLOW_THREADS
    balanced_signs(seed_lo, seed_hi, 0, N, rbuf, job.kind);
    if (ilp64 == 2 && pool_parallel != NULL && items >= 2) {
        __atomic_add_fetch(&pool_batches, 1, __ATOMIC_RELAXED);
        pool_parallel(batch_part, &job, 0, 0);
        if (job.failed) batch_items(&job, 0, items, tmp); /* (no scratch on a thread) */
    } else if (ilp64 != 2 && !dbl && own_batch(items, M, K, N)) {
        /* numpy's float32 batch of small matrices: the products above, each matrix's on
         * one of OpenBLAS's threads (the same numbers whichever thread makes them) */
        job.own = 1;
        on_pool(2, batch_range, &job, items, 1);
        if (job.failed) batch_items(&job, 0, items, tmp);
    } else
        batch_items(&job, 0, items, tmp);
    Py_END_ALLOW_THREADS
}

/* stage1_batch(fn, ilp64, a, b, c, seed_lo, seed_hi, r, y, z, w, d, tmp, i0, k, kmed, k9,
 *              stats) -> True, or False where a matrix's layout has no unit stride
 * stage1 for every matrix of a batch: a (..., M, K), b (..., K, N), c (..., M, N) strided
 * float32 (or all float64) arrays of one batch shape, each matrix with unit stride along
 * one of its axes.  One r = the signs of (seed, stream 0) for all; per matrix t: y_t =
 * B_t r, z_t = A_t y_t, w_t = C_t r through the BLAS gemv at fn (for float32 numpy
 * arrays where own_batch holds, f32_gemv_avx512 on OpenBLAS's threads), d_t = |z_t - w_t| into
 * d (items x M, float64), and stats[t] = (max |d_t|, d_t(kmed), d_t(k9), sum c^2 and sum
 * a^2 of rows i0 .. i0 + k - 1, sum y_t^2) (items x 6, float64).  r (N), y (items x K),
 * z, w (items x M): contiguous, of the operands' dtype; tmp: M float64 scratch. */
static PyObject *stage1_batch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 18) {
        PyErr_SetString(PyExc_TypeError, "stage1_batch(fn, ilp64, a, b, c, seed_lo, seed_hi, "
                                         "r, y, z, w, d, tmp, i0, k, kmed, k9, stats)");
        return NULL;
    }
    uintptr_t fn = (uintptr_t)PyLong_AsUnsignedLongLong(args[0]);
    int ilp64 = (int)PyLong_AsLong(args[1]);
    uint64_t seed_lo = PyLong_AsUnsignedLongLong(args[5]);
    uint64_t seed_hi = PyLong_AsUnsignedLongLong(args[6]);
    Py_ssize_t i0 = PyLong_AsSsize_t(args[13]), k = PyLong_AsSsize_t(args[14]);
    Py_ssize_t kmed = PyLong_AsSsize_t(args[15]), k9 = PyLong_AsSsize_t(args[16]);
    if (PyErr_Occurred() || fn == 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "stage1_batch: no gemv");
        return NULL;
    }
    /* a, b, c strided; r, y, z, w, d, tmp, stats contiguous and written */
    static const int idx[10] = {2, 3, 4, 7, 8, 9, 10, 11, 12, 17};
    Py_buffer bf[10];
    int got = 0;
    for (int i = 0; i < 10; i++) {
        int flags = i < 3 ? PyBUF_STRIDES : (PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE);
        if (PyObject_GetBuffer(args[idx[i]], &bf[i], flags) < 0) goto fail;
        got++;
    }
    Py_buffer *A = &bf[0], *B = &bf[1], *C = &bf[2], *R = &bf[3], *Y = &bf[4], *Z = &bf[5],
              *W = &bf[6], *D = &bf[7], *TMP = &bf[8], *S = &bf[9];
    Py_ssize_t item = A->itemsize, items = 0, M = 0, K = 0, N = 0;
    if (!batch_dims(A, B, C, &items, &M, &K, &N) || R->len != N * item
        || Y->len != items * K * item || Z->len != items * M * item
        || W->len != items * M * item || D->len != items * M * 8 || TMP->len < M * 8
        || S->len != items * 6 * 8 || kmed < 0 || kmed >= M || k9 >= M || k < 1 || i0 < 0
        || i0 + k > M) {
        PyErr_SetString(PyExc_ValueError, "stage1_batch: shapes or dtypes do not match");
        goto fail;
    }
    Py_ssize_t lda, ldb, ldc;
    int ta = layout(A, &lda), tb = layout(B, &ldb), tc = layout(C, &ldc);
    if (ta < 0 || tb < 0 || tc < 0) {
        for (int i = 0; i < got; i++) PyBuffer_Release(&bf[i]);
        Py_RETURN_FALSE;
    }
    run_stage1_batch(fn, ilp64, A, B, C, ta, lda, tb, ldb, tc, ldc, items, M, K, N, seed_lo,
                     seed_hi, R->buf, Y->buf, Z->buf, W->buf, (double *)D->buf,
                     (double *)TMP->buf, i0, k, kmed, k9, (double *)S->buf);
    for (int i = 0; i < got; i++) PyBuffer_Release(&bf[i]);
    Py_RETURN_TRUE;
fail:
    for (int i = 0; i < got; i++) PyBuffer_Release(&bf[i]);
    return NULL;
}

/* row_noise_batch(a, b, c, items, c2, s2, b2) -> True, or False where a layout has no unit
 * stride.  For each listed matrix t = items[n] of a batch laid out as for stage1_batch:
 * c2[n, i] = ||C_t,i||^2, b2 = ||B_t,k||^2 and s2[n, i] = sum_k a_t,ik^2 b2_k, in float64
 * (the per-row model noise of the screen's second look).  items: int64; c2, s2: (n, M)
 * float64; b2: K float64 scratch. */
static PyObject *row_noise_batch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "row_noise_batch(a, b, c, items, c2, s2, b2)");
        return NULL;
    }
    Py_buffer bf[7];
    int got = 0;
    for (int i = 0; i < 7; i++) {
        int flags = i < 3 ? PyBUF_STRIDES : i == 3 ? PyBUF_C_CONTIGUOUS
                                                   : (PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE);
        if (PyObject_GetBuffer(args[i], &bf[i], flags) < 0) goto fail;
        got++;
    }
    Py_buffer *A = &bf[0], *B = &bf[1], *C = &bf[2], *IT = &bf[3], *C2 = &bf[4], *S2 = &bf[5],
              *B2 = &bf[6];
    Py_ssize_t item = A->itemsize, items = 0, M = 0, K = 0, N = 0, n = IT->len / 8;
    if (!batch_dims(A, B, C, &items, &M, &K, &N) || C2->len != n * M * 8 || S2->len != n * M * 8 || B2->len < K * 8) {
        PyErr_SetString(PyExc_ValueError, "row_noise_batch: shapes or dtypes do not match");
        goto fail;
    }
    const int64_t *its = (const int64_t *)IT->buf;
    for (Py_ssize_t m = 0; m < n; m++) {
        if (its[m] < 0 || its[m] >= items) {
            PyErr_SetString(PyExc_ValueError, "row_noise_batch: item out of range");
            goto fail;
        }
    }
    Py_ssize_t lda, ldb, ldc;
    int ta = layout(A, &lda), tb = layout(B, &ldb), tc = layout(C, &ldc);
    if (ta < 0 || tb < 0 || tc < 0) {
        for (int i = 0; i < got; i++) PyBuffer_Release(&bf[i]);
        Py_RETURN_FALSE;
    }
    int dbl = item == 8, kind = dbl ? 1 : 0;
    double *b2 = (double *)B2->buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t m = 0; m < n; m++) {
        Py_ssize_t t = (Py_ssize_t)its[m];
        const char *a = (const char *)A->buf + item_offset(A, t);
        const char *b = (const char *)B->buf + item_offset(B, t);
        const char *c = (const char *)C->buf + item_offset(C, t);
        double *c2 = (double *)C2->buf + m * M, *s2 = (double *)S2->buf + m * M;
        row_sums(c, kind, tc, ldc, M, N, NULL, c2);  /* ||C_i||^2 */
        row_sums(b, kind, tb, ldb, K, N, NULL, b2);  /* ||B_k||^2 */
        row_sums(a, kind, ta, lda, M, K, b2, s2);    /* sum_k a_ik^2 ||B_k||^2 */
    }
    Py_END_ALLOW_THREADS
    for (int i = 0; i < got; i++) PyBuffer_Release(&bf[i]);
    Py_RETURN_TRUE;
fail:
    for (int i = 0; i < got; i++) PyBuffer_Release(&bf[i]);
    return NULL;
}

/* gemv(fn, interface, x, v, out): out = x v for a C-contiguous 2-D x (float32 or float64)
 * through the BLAS function at fn -- what stage1 calls, for the general path's products */
static PyObject *gemv_py(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "gemv(fn, interface, x, v, out)");
        return NULL;
    }
    uintptr_t fn = (uintptr_t)PyLong_AsUnsignedLongLong(args[0]);
    int ilp64 = (int)PyLong_AsLong(args[1]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer x, v, out;
    if (PyObject_GetBuffer(args[2], &x, PyBUF_C_CONTIGUOUS | PyBUF_ND) < 0) return NULL;
    if (get(args[3], &v, 0) < 0) { PyBuffer_Release(&x); return NULL; }
    if (get(args[4], &out, 1) < 0) { PyBuffer_Release(&x); PyBuffer_Release(&v); return NULL; }
    int ok = x.ndim == 2 && (x.itemsize == 4 || x.itemsize == 8)
             && v.len == x.shape[1] * x.itemsize && out.len == x.shape[0] * x.itemsize
             && fn != 0;
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        gemv(fn, ilp64, x.itemsize == 8, x.shape[0], x.shape[1], x.shape[1], x.buf, v.buf,
             out.buf);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&x); PyBuffer_Release(&v); PyBuffer_Release(&out);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "gemv: shapes or dtypes do not match");
        return NULL;
    }
    Py_RETURN_NONE;
}


/* ---- verify's common call for a batch ---------------------------------------------------
 * common_batch(a, b, c, backend): common for a strided batch a (..., M, K), b (..., K, N),
 * c (..., M, N) of float32 or float64 arrays (one batch shape, each matrix with unit
 * stride along one of its axes: stage1_batch's inputs), with a per-shape plan registered
 * by common_batch_plan, and the screen of kcontract.freivalds._screen.batch_screen decided
 * in the same arithmetic (numpy's: a square root for `** 0.5`, clip as min(max(., lo), hi)).
 * Returns None (not this path: another layout or dtype, or the plan is in use), the plan's
 * key (batch shape, M, K, N, item, backend) where the shape has none yet, or
 * (seed, ratio, thresholds, scales, info) -- ratio None where a statistic is not finite;
 * the screen passes the batch where ratio <= 1 (thresholds and scales: one float per
 * matrix, in the batch's order); where it does not, |d| (items x M float64) and y = B r
 * (items x K) follow as bytes, for the general path to take the screen from there.
 * common_batch(a, b, c, backend, seed, relief_min, max_rows): rows beyond the screen get
 * the per-row second look (relieve; a 6-tuple with the screen's ratio where every row
 * clears its own noise, else the ratios after it as an 8th item), and where at most
 * max_rows rows are still beyond, the float64 look (exact_rows_passed: a 7-tuple where
 * it clears them). */
#define BPLANS 32
#define BDIMS 8
struct bplan {
    uintptr_t fn;
    int ilp64, busy;
    Py_ssize_t nd, dims[BDIMS], items, M, K, N, item, backend, k, kmed, k9;
    double alpha, beta, cap_slack, med, med_q90, floor_fraction, lam;
    /* the float64 look's constants (exact == 0: none given): unit roundoffs of the
     * accumulator, the output and the recomputation, the accumulator's and the output's
     * absolute floors, the element and row log terms, a float64 product */
    int exact, same_precision;
    double u_acc, u_out, u_rec, acc_tiny, out_tiny, L_e, L_r;
    char *mem; /* r, y, z, w, then d, tmp, stats (float64) */
    PyObject *info;
};
static PyObject *bplans[BPLANS];
static struct bplan *bplan_at[BPLANS];

/* the plan's vectors, each from a 64-byte boundary (MKL's gemv rounds differently with the
 * vectors' alignment: the Python path's scratch is aligned the same way) */
#define AL64(x) (((x) + 63) & ~(size_t)63)
static size_t bplan_bytes(Py_ssize_t N, Py_ssize_t items, Py_ssize_t M, Py_ssize_t K,
                          Py_ssize_t item) {
    return AL64((size_t)(N * item)) + AL64((size_t)(items * K * item))
           + AL64((size_t)(items * M * item)) * 2 + AL64((size_t)(items * M * 8))
           + AL64((size_t)(M * 8)) + AL64((size_t)(6 * items * 8));
}

static void bplan_free(PyObject *cap) {
    struct bplan *p = PyCapsule_GetPointer(cap, "kcontract.bplan");
    if (p == NULL) return;
    free(p->mem);
    Py_XDECREF(p->info);
    free(p);
}

/* common_batch_plan(fn, ilp64, batch, M, K, N, item, backend, k, kmed, k9, alpha, beta,
 *                   cap_slack, med, med_q90, floor_fraction, lam, info, exact=None)
 * exact: the float64 look's constants (u_acc, u_out, u_rec, acc_tiny, out_tiny, L_e, L_r,
 * same_precision), or None (no float64 look in the call) */
static PyObject *common_batch_plan(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 19 && nargs != 20) {
        PyErr_SetString(PyExc_TypeError, "common_batch_plan: 19 or 20 arguments");
        return NULL;
    }
    struct bplan *p = calloc(1, sizeof *p);
    if (p == NULL) return PyErr_NoMemory();
    p->fn = (uintptr_t)PyLong_AsUnsignedLongLong(args[0]);
    p->ilp64 = (int)PyLong_AsLong(args[1]);
    PyObject *batch = args[2];
    if (!PyTuple_Check(batch) || PyTuple_GET_SIZE(batch) < 1
        || PyTuple_GET_SIZE(batch) > BDIMS) {
        PyErr_SetString(PyExc_ValueError, "common_batch_plan: batch must be a tuple of 1 to 8");
        free(p);
        return NULL;
    }
    p->nd = PyTuple_GET_SIZE(batch);
    p->items = 1;
    for (Py_ssize_t j = 0; j < p->nd; j++) {
        p->dims[j] = PyLong_AsSsize_t(PyTuple_GET_ITEM(batch, j));
        p->items *= p->dims[j];
    }
    Py_ssize_t *ints[] = {&p->M, &p->K, &p->N, &p->item, &p->backend, &p->k, &p->kmed, &p->k9};
    for (int i = 0; i < 8; i++) *ints[i] = PyLong_AsSsize_t(args[3 + i]);
    double *dbls[] = {&p->alpha, &p->beta, &p->cap_slack, &p->med, &p->med_q90,
                      &p->floor_fraction, &p->lam};
    for (int i = 0; i < 7; i++) *dbls[i] = PyFloat_AsDouble(args[11 + i]);
    if (nargs == 20 && args[19] != Py_None) {
        PyObject *e = args[19];
        if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) != 8) {
            PyErr_SetString(PyExc_ValueError, "common_batch_plan: exact must be 8 numbers");
            free(p);
            return NULL;
        }
        double *xs[] = {&p->u_acc, &p->u_out, &p->u_rec, &p->acc_tiny, &p->out_tiny, &p->L_e,
                        &p->L_r};
        for (int i = 0; i < 7; i++) *xs[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(e, i));
        p->same_precision = PyObject_IsTrue(PyTuple_GET_ITEM(e, 7)) == 1;
        p->exact = 1;
    }
    if (PyErr_Occurred()) {
        free(p);
        return NULL;
    }
    if ((p->item != 4 && p->item != 8) || p->items < 1 || p->M < 1 || p->K < 1 || p->N < 1
        || p->k < 1 || p->k > p->M || p->kmed < 0 || p->kmed >= p->M || p->k9 >= p->M
        || p->fn == 0) {
        PyErr_SetString(PyExc_ValueError, "common_batch_plan: sizes do not match");
        free(p);
        return NULL;
    }
    void *mem = NULL;
    if (posix_memalign(&mem, 64, bplan_bytes(p->N, p->items, p->M, p->K, p->item)) != 0)
        mem = NULL;
    p->mem = mem;
    if (p->mem == NULL) {
        free(p);
        return PyErr_NoMemory();
    }
    p->info = args[18];
    Py_INCREF(p->info);
    PyObject *cap = PyCapsule_New(p, "kcontract.bplan", bplan_free);
    if (cap == NULL) {
        Py_DECREF(p->info);
        free(p->mem);
        free(p);
        return NULL;
    }
    Py_XDECREF(bplans[BPLANS - 1]);
    memmove(bplans + 1, bplans, (BPLANS - 1) * sizeof *bplans);
    memmove(bplan_at + 1, bplan_at, (BPLANS - 1) * sizeof *bplan_at);
    bplans[0] = cap;
    bplan_at[0] = p;
    Py_RETURN_NONE;
}

/* relieve for matrix t of a strided batch (the norms by row_sums in float64, as
 * row_noise_batch computes them for the general path); -1 where scratch cannot be had */
static double relieved_item(const Py_buffer *A, const Py_buffer *B, const Py_buffer *C,
                            int ta, Py_ssize_t lda, int tb, Py_ssize_t ldb, int tc,
                            Py_ssize_t ldc, Py_ssize_t t, Py_ssize_t M, Py_ssize_t K,
                            Py_ssize_t N, int kind, const double *d, double tau,
                            const struct plan_consts *k, double *rows) {
    double *c2 = malloc((size_t)(3 * M + K) * sizeof(double));
    if (c2 == NULL) return -1.0;
    double *s2 = c2 + M, *tmp = s2 + M, *b2 = tmp + M;
    row_sums((const char *)C->buf + item_offset(C, t), kind, tc, ldc, M, N, NULL, c2);
    row_sums((const char *)B->buf + item_offset(B, t), kind, tb, ldb, K, N, NULL, b2);
    row_sums((const char *)A->buf + item_offset(A, t), kind, ta, lda, M, K, b2, s2);
    double worst = relieve(c2, s2, tmp, d, M, tau, k, rows);
    free(c2);
    return worst;
}

/* sqrt-free Bernstein deviation (model.bernstein_t): the smallest t with
 * 2 exp(-t^2 / (2V + 2bt/3)) <= 2 exp(-L) */
static inline double bernstein(double V, double b, double L) {
    double bl = b * L / 3.0;
    return bl + sqrt(bl * bl + 2.0 * V * L);
}

/* The general path's float64 look (kcontract.freivalds._core._verify's stage 2) at the
 * rows (ft[f], fi[f]) of a strided batch: each row recomputed in float64 (sum_k a_ik b_kj
 * and sum_k |a_ik b_kj|), every element against model.element_bounds (the probabilistic
 * bound) and the row's aggregate against model.row_aggregate_limit (errors normalised by
 * model.element_sigma2).  The largest |error| / bound where every element and every row
 * is within its bound; -1 where one is not or an element of C is not finite (the general
 * path then decides and reports: the overflow rules, the suspects, the repair); -2 where
 * scratch cannot be had. */
static double exact_look(const struct bplan *p, const Py_buffer *A, const Py_buffer *B,
                         const Py_buffer *C, int ta, Py_ssize_t lda, int tb, Py_ssize_t ldb,
                         int tc, Py_ssize_t ldc, int kind, const Py_ssize_t *ft,
                         const Py_ssize_t *fi, Py_ssize_t nf) {
    Py_ssize_t K = p->K, N = p->N;
    double *ar = malloc((size_t)(K + 2 * N) * sizeof(double));
    if (ar == NULL) return -2.0;
    double *cs = ar + K, *ab = cs + N, worst = 0.0, Kd = (double)K;
    double growth = 1.0 + (2.0 * Kd * p->u_acc < 1.0 ? 2.0 * Kd * p->u_acc : 1.0);
    double floor = (Kd + 1.0) * p->acc_tiny + p->out_tiny;
    double limit = (double)N + 2.0 * sqrt((double)N * p->L_r) + 2.0 * p->L_r;
    for (Py_ssize_t f = 0; f < nf && worst >= 0; f++) {
        Py_ssize_t t = ft[f], i = fi[f];
        const char *a = (const char *)A->buf + item_offset(A, t);
        const char *b = (const char *)B->buf + item_offset(B, t);
        const char *c = (const char *)C->buf + item_offset(C, t);
        for (Py_ssize_t k = 0; k < K; k++) ar[k] = elem(a, kind, ta ? k * lda + i : i * lda + k);
        memset(cs, 0, (size_t)(2 * N) * sizeof(double));
        for (Py_ssize_t k = 0; k < K; k++) {
            double aik = ar[k];
            for (Py_ssize_t j = 0; j < N; j++) {
                double v = aik * elem(b, kind, tb ? j * ldb + k : k * ldb + j);
                cs[j] += v;
                ab[j] += fabs(v);
            }
        }
        double q = 0.0;
        for (Py_ssize_t j = 0; j < N; j++) {
            double cij = elem(c, kind, tc ? j * ldc + i : i * ldc + j), cstar = fabs(cs[j]);
            if (!isfinite(cij)) { worst = -1.0; break; }
            double m0 = 0.5 * (ab[j] + cstar), m = m0 * growth;
            double t1 = bernstein(p->u_acc * p->u_acc * (Kd + 3.0) * m * m / 3.0,
                                  p->u_acc * m, p->L_e);
            double rec = p->same_precision
                             ? bernstein(p->u_rec * p->u_rec * (Kd + 3.0) * m * m / 3.0,
                                         p->u_rec * m, p->L_e)
                             : 1.01 * Kd * p->u_rec * ab[j];
            double fin = (p->u_out + p->u_acc) * (cstar + t1) * (1.0 + p->u_out);
            double bound = t1 + rec + fin + floor, err = cij - cs[j];
            double er = bound > 0 ? fabs(err) / bound : (err != 0 ? INFINITY : 0.0);
            if (!(er <= 1.0)) { worst = -1.0; break; }
            if (er > worst) worst = er;
            double o = (p->u_out + p->u_acc) * cstar;
            double s2 = p->u_acc * p->u_acc * (Kd + 3.0) * m0 * m0 / 3.0 + o * o / 3.0
                        + (Kd + 1.0) * p->acc_tiny * p->acc_tiny;
            if (s2 > 0) q += err * err / s2;
        }
        if (worst >= 0 && q > limit) worst = -1.0;
    }
    free(ar);
    return worst;
}

/* common_batch's float64 look: the rows whose ratio after the second look (rows,
 * items x M) exceeds 1, where there are at most max_rows (and EXACT_ROWS) of them, through
 * exact_look; where it clears them, the passing tuple (seed, largest error / bound,
 * thresholds, scales, info, screen ratio, ((t, i), ...) in descending order of their
 * ratios, ties in the batch's order: the general path's screened_rows); NULL otherwise
 * (with an exception set only where memory ran out).  taus and scales are borrowed. */
#define EXACT_ROWS 64
static PyObject *exact_rows_passed(const struct bplan *p, const Py_buffer *A,
                                   const Py_buffer *B, const Py_buffer *C, int ta,
                                   Py_ssize_t lda, int tb, Py_ssize_t ldb, int tc,
                                   Py_ssize_t ldc, int kind, const double *rows,
                                   Py_ssize_t max_rows, uint64_t seed, double ratio,
                                   PyObject *taus, PyObject *scales) {
    Py_ssize_t ft[EXACT_ROWS], fi[EXACT_ROWS], nf = 0, cap = max_rows;
    double fr[EXACT_ROWS];
    if (cap > EXACT_ROWS) cap = EXACT_ROWS;
    for (Py_ssize_t t = 0; t < p->items; t++)
        for (Py_ssize_t i = 0; i < p->M; i++) {
            double v = rows[t * p->M + i];
            if (!(v > 1.0)) continue;
            if (nf == cap) return NULL;
            Py_ssize_t at = nf++; /* insertion, stable: after the rows of a ratio as large */
            while (at > 0 && fr[at - 1] < v) {
                ft[at] = ft[at - 1];
                fi[at] = fi[at - 1];
                fr[at] = fr[at - 1];
                at--;
            }
            ft[at] = t;
            fi[at] = i;
            fr[at] = v;
        }
    if (nf == 0) return NULL;
    double worst = exact_look(p, A, B, C, ta, lda, tb, ldb, tc, ldc, kind, ft, fi, nf);
    if (worst == -2.0) return PyErr_NoMemory();
    if (worst < 0) return NULL;
    PyObject *flagged = PyTuple_New(nf);
    if (flagged == NULL) return NULL;
    for (Py_ssize_t f = 0; f < nf; f++) {
        PyObject *ti = Py_BuildValue("(nn)", ft[f], fi[f]);
        if (ti == NULL) {
            Py_DECREF(flagged);
            return NULL;
        }
        PyTuple_SET_ITEM(flagged, f, ti);
    }
    return Py_BuildValue("(KdOOOdN)", (unsigned long long)seed, worst, taus, scales, p->info,
                         ratio, flagged);
}

static PyObject *common_batch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 4 || nargs > 7) {
        PyErr_SetString(PyExc_TypeError,
                        "common_batch(a, b, c, backend, seed=None, relief_min=0, max_rows=0)");
        return NULL;
    }
    PyObject *given = nargs >= 5 ? args[4] : Py_None;
    double relief_min = nargs >= 6 ? PyFloat_AsDouble(args[5]) : 0.0;
    Py_ssize_t max_rows = nargs == 7 ? PyLong_AsSsize_t(args[6]) : 0;
    Py_ssize_t backend = PyLong_AsSsize_t(args[3]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer bf[3];
    int got = 0;
    for (int i = 0; i < 3; i++) {
        if (PyObject_GetBuffer(args[i], &bf[i], PyBUF_STRIDES | PyBUF_FORMAT) < 0) {
            PyErr_Clear();
            for (int j = 0; j < got; j++) PyBuffer_Release(&bf[j]);
            Py_RETURN_NONE;
        }
        got++;
    }
    PyObject *out = NULL, *cap = NULL;
    const Py_buffer *A = &bf[0], *B = &bf[1], *C = &bf[2];
    Py_ssize_t items, M, K, N, lda, ldb, ldc;
    int item = float_kind(A);
    if (item == 0 || float_kind(B) != item || float_kind(C) != item
        || !batch_dims(A, B, C, &items, &M, &K, &N) || A->ndim - 2 > BDIMS) {
        out = Py_None;
        Py_INCREF(out);
        goto done;
    }
    int ta = layout(A, &lda), tb = layout(B, &ldb), tc = layout(C, &ldc);
    if (ta < 0 || tb < 0 || tc < 0) {
        out = Py_None;
        Py_INCREF(out);
        goto done;
    }
    Py_ssize_t nd = A->ndim - 2;
    struct bplan *p = NULL;
    int at = -1;
    for (int i = 0; i < BPLANS && bplan_at[i] != NULL && p == NULL; i++) {
        struct bplan *q = bplan_at[i];
        if (q->nd != nd || q->M != M || q->K != K || q->N != N || q->item != item
            || q->backend != backend)
            continue;
        int same = 1;
        for (Py_ssize_t j = 0; j < nd; j++) same &= q->dims[j] == A->shape[j];
        if (same) {
            p = q;
            at = i;
        }
    }
    if (p == NULL) {
        PyObject *batch = PyTuple_New(nd);
        if (batch == NULL) goto done;
        for (Py_ssize_t j = 0; j < nd; j++)
            PyTuple_SET_ITEM(batch, j, PyLong_FromSsize_t(A->shape[j]));
        out = Py_BuildValue("(Nnnnin)", batch, M, K, N, item, backend);
        goto done;
    }
    if (at > 0) { /* the most recently used first */
        PyObject *c0 = bplans[at];
        memmove(bplans + 1, bplans, (size_t)at * sizeof *bplans);
        memmove(bplan_at + 1, bplan_at, (size_t)at * sizeof *bplan_at);
        bplans[0] = c0;
        bplan_at[0] = p;
    }
    if (p->busy) { /* another thread's check holds its buffers: the Python path */
        out = Py_None;
        Py_INCREF(out);
        goto done;
    }
    cap = bplans[0];
    uint64_t seed;
    if (take_seed(given, &seed) < 0) {
        cap = NULL;
        goto done;
    }
    Py_ssize_t i0 = (Py_ssize_t)(seed % (uint64_t)(M - p->k + 1));
    char *r = p->mem, *y = r + AL64((size_t)(N * item));
    char *z = y + AL64((size_t)(items * K * item)), *w = z + AL64((size_t)(items * M * item));
    double *d = (double *)(w + AL64((size_t)(items * M * item)));
    double *tmp = (double *)((char *)d + AL64((size_t)(items * M * 8)));
    double *st = (double *)((char *)tmp + AL64((size_t)(M * 8)));
    Py_INCREF(cap); /* the plan outlives its eviction by another thread meanwhile */
    p->busy = 1;
    run_stage1_batch(p->fn, p->ilp64, A, B, C, ta, lda, tb, ldb, tc, ldc, items, M, K, N, seed,
                     0, r, y, z, w, d, tmp, i0, p->k, p->kmed, p->k9, st);
    /* (the plan's buffers st, d and y stay busy until done_cap: a call into Python while
     * they are read can let another thread in) */
    /* batch_screen's arithmetic, matrix by matrix */
    PyObject *taus = PyTuple_New(items), *scales = PyTuple_New(items);
    if (taus == NULL || scales == NULL) {
        Py_XDECREF(taus);
        Py_XDECREF(scales);
        goto done_cap;
    }
    double ratio = 0.0;
    int finite = 1;
    for (Py_ssize_t t = 0; t < items && finite; t++) {
        const double *s = st + 6 * t;
        finite = isfinite(s[0]) && isfinite(s[1]) && isfinite(s[3]) && isfinite(s[4])
                 && isfinite(s[5]) && (p->k9 < 0 || isfinite(s[2]));
        double cn = sqrt(s[3] / (double)p->k);
        double sn = sqrt(s[4] / (double)p->k) * sqrt(s[5] / (double)K);
        double cap_t = p->cap_slack * sqrt(p->alpha * (cn * cn) + p->beta * (sn * sn));
        double med_d = s[1];
        if (p->k9 >= 0) {
            double t9 = s[2] * p->med_q90;
            med_d = med_d >= t9 ? med_d : t9;
        }
        double v = med_d / p->med, lo = p->floor_fraction * cap_t;
        v = v >= lo ? v : lo;
        v = v <= cap_t ? v : cap_t;
        double tau = p->lam * v, rr = s[0] > 0 ? s[0] / tau : 0.0;
        if (rr > ratio || rr != rr) ratio = rr;
        PyTuple_SET_ITEM(taus, t, PyFloat_FromDouble(tau));
        PyTuple_SET_ITEM(scales, t, PyFloat_FromDouble(v));
    }
    /* a row beyond the screen: the per-row second look of every matrix that has one (with
     * relief_min); where every row then clears its own noise, the batch passes */
    double relieved = NAN;
    if (finite && ratio > 1.0 && isfinite(ratio) && relief_min > 0) {
        struct plan_consts k = {p->cap_slack, p->alpha, p->beta, relief_min};
        relieved = 0.0;
        for (Py_ssize_t t = 0; t < items && relieved <= 1.0; t++) {
            PyObject *to = PyTuple_GET_ITEM(taus, t);
            double tau = to ? PyFloat_AS_DOUBLE(to) : NAN, s0 = st[6 * t];
            double rr = s0 > 0 ? s0 / tau : 0.0, v = rr;
            if (to == NULL) v = -1.0; /* (its float could not be made) */
            else if (rr > 1.0) {
                v = relieved_item(A, B, C, ta, lda, tb, ldb, tc, ldc, t, M, K, N,
                                  item == 8 ? 1 : 0, d + t * M, tau, &k, NULL);
                if (v != v) v = rr; /* no relief for this matrix: its ratios stand */
            }
            if (v < 0) {
                Py_DECREF(taus);
                Py_DECREF(scales);
                PyErr_NoMemory();
                goto done_cap;
            }
            if (v > relieved) relieved = v;
        }
    }
    if (!finite) {
        Py_DECREF(taus);
        Py_DECREF(scales);
        out = Py_BuildValue("(KOOOO)", (unsigned long long)seed, Py_None, Py_None, Py_None,
                            p->info);
    } else if (relieved <= 1.0) { /* (NaN: not relieved) */
        out = Py_BuildValue("(KdNNOd)", (unsigned long long)seed, relieved, taus, scales,
                            p->info, ratio);
    } else if (ratio <= 1.0) {
        out = Py_BuildValue("(KdNNO)", (unsigned long long)seed, ratio, taus, scales, p->info);
    } else { /* a row beyond the screen: |d| and y for the general path to take over, and
              * where the second look ran, every row's ratio after it (row_relief's
              * (items, M) ratios: the general path then recomputes only the rows beyond) */
        PyObject *rows = Py_None;
        Py_INCREF(rows);
        if (relieved == relieved) {
            Py_DECREF(rows);
            rows = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(items * M * 8));
            if (rows == NULL) {
                Py_DECREF(taus);
                Py_DECREF(scales);
                goto done_cap;
            }
            double *rr = (double *)PyBytes_AS_STRING(rows);
            struct plan_consts k = {p->cap_slack, p->alpha, p->beta, relief_min};
            for (Py_ssize_t t = 0; t < items; t++) {
                double tau = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(taus, t)), *row = rr + t * M;
                const double *dt = d + t * M;
                for (Py_ssize_t i = 0; i < M; i++) row[i] = dt[i] > 0 ? dt[i] / tau : 0.0;
                if (!(st[6 * t] > 0 && st[6 * t] / tau > 1.0)) continue;
                double v = relieved_item(A, B, C, ta, lda, tb, ldb, tc, ldc, t, M, K, N,
                                         item == 8 ? 1 : 0, dt, tau, &k, row);
                if (v < 0) {
                    Py_DECREF(rows);
                    Py_DECREF(taus);
                    Py_DECREF(scales);
                    PyErr_NoMemory();
                    goto done_cap;
                }
                if (v != v) /* no relief for this matrix: its ratios stand */
                    for (Py_ssize_t i = 0; i < M; i++) row[i] = dt[i] > 0 ? dt[i] / tau : 0.0;
            }
        }
        /* few rows left beyond their own noise: the general path's float64 look at them
         * here, where it clears them all */
        if (rows != Py_None && p->exact && max_rows > 0) {
            out = exact_rows_passed(p, A, B, C, ta, lda, tb, ldb, tc, ldc, item == 8 ? 1 : 0,
                                    (const double *)PyBytes_AS_STRING(rows), max_rows, seed,
                                    ratio, taus, scales);
            if (out != NULL || PyErr_Occurred()) {
                Py_DECREF(rows);
                Py_DECREF(taus);
                Py_DECREF(scales);
                goto done_cap;
            }
        }
        out = Py_BuildValue("(KdNNOy#y#N)", (unsigned long long)seed, ratio, taus, scales,
                            p->info, (const char *)d, (Py_ssize_t)(items * M * 8),
                            (const char *)y, (Py_ssize_t)(items * K * item), rows);
    }
done_cap:
    p->busy = 0;
    Py_DECREF(cap);
done:
    for (int j = 0; j < got; j++) PyBuffer_Release(&bf[j]);
    return out;
}

static PyMethodDef methods[] = {
    {"stage1_batch", (PyCFunction)(void (*)(void))stage1_batch, METH_FASTCALL,
     "stage1_batch(fn, ilp64, a, b, c, seed_lo, seed_hi, r, y, z, w, d, tmp, i0, k, kmed, "
     "k9, stats): stage1 for every matrix of a batch"},
    {"row_noise_batch", (PyCFunction)(void (*)(void))row_noise_batch, METH_FASTCALL,
     "row_noise_batch(a, b, c, items, c2, s2, b2): squared row norms for the second look"},
    {"gemv", (PyCFunction)(void (*)(void))gemv_py, METH_FASTCALL,
     "gemv(fn, interface, x, v, out): out = x v"},
    {"stage1", (PyCFunction)(void (*)(void))stage1, METH_FASTCALL,
     "stage1(fn, ilp64, a, b, c, seed_lo, seed_hi, r, y, z, w, buf, i0, k, kmed, k9, rows, "
     "y_given, zoff)"},
    {"signs", (PyCFunction)(void (*)(void))signs, METH_FASTCALL,
     "signs(seed_lo, seed_hi, stream, n, out, kind) -> sum of the signs"},
    {"screen_stats", (PyCFunction)(void (*)(void))screen_stats, METH_FASTCALL,
     "screen_stats(z, w, kz, buf, k, k9, cblk, kc, ablk, ka, y, ky, rows) -> 6 floats"},
    {"common", (PyCFunction)(void (*)(void))common, METH_FASTCALL,
     "common(a, b, c): verify's common call (see the source)"},
    {"linear", (PyCFunction)(void (*)(void))linear, METH_FASTCALL,
     "linear(x_ptr, out_ptr, M, K, N, half, r, y, brms, zoff, seed, b2=None, relief_min=0): "
     "the guard's cached linear check, with the per-row second look given b2 (see the "
     "source)"},
    {"common_batch", (PyCFunction)(void (*)(void))common_batch, METH_FASTCALL,
     "common_batch(a, b, c, backend): verify's common call for a batch (see the source)"},
    {"common_batch_plan", (PyCFunction)(void (*)(void))common_batch_plan, METH_FASTCALL,
     "common_batch_plan(...): registers common_batch's plan for one shape"},
    {"common_ptr", (PyCFunction)(void (*)(void))common_ptr, METH_FASTCALL,
     "common_ptr(a_ptr, b_ptr, c_ptr, M, K, N, half, citem, backend): common at addresses"},
    {"common_plan", (PyCFunction)(void (*)(void))common_plan, METH_FASTCALL,
     "common_plan(...): registers common's plan for one shape"},
    {"set_pool", (PyCFunction)(void (*)(void))set_pool, METH_FASTCALL,
     "set_pool(parallel, thread_num, num_threads): the OpenMP runtime the helper's products "
     "and MKL's batches may run on"},
    {"lean", (PyCFunction)(void (*)(void))lean, METH_FASTCALL,
     "the guard's remembered lean linear check (see the source)"},
    {"set_passed", (PyCFunction)(void (*)(void))set_passed, METH_FASTCALL,
     "set_passed(cls, make, false_alarm): the common calls' passing result's class"},
    {"guard_consts", (PyCFunction)(void (*)(void))guard_consts, METH_FASTCALL,
     "guard_consts(clock, step, mask, relief_min, defer_product_bytes): what GuardCore's "
     "calls need of the guard's module"},
    {"peek", (PyCFunction)(void (*)(void))peek, METH_FASTCALL,
     "peek(address, offsets, itemsize[, expected]) -> the elements' bytes at those offsets, "
     "or whether they are the expected ones"},
    {"set_tensor_access", (PyCFunction)(void (*)(void))set_tensor_access, METH_FASTCALL,
     "set_tensor_access(version, data_ptr[, tensor_type]): torch's TensorBase._version "
     "descriptor and TensorBase.data_ptr, called directly by lean (None, None: looked up by "
     "name), and torch.Tensor, whose products a deferring GuardCore records (None: none)"},
    {"own_gemv", (PyCFunction)(void (*)(void))own_gemv_py, METH_FASTCALL,
     "own_gemv(M, K) -> whether a check's float32 product X v (M x K, row-major) is the "
     "row kernel's (rows_dot, on the pool) rather than the back end's BLAS gemv"},
    {"own_batch", (PyCFunction)(void (*)(void))own_batch_py, METH_FASTCALL,
     "own_batch(items, M, K, N) -> whether a float32 batch of numpy arrays has the "
     "helper's own products (f32_gemv_avx512, on OpenBLAS's threads) rather than the BLAS"},
    {"pool_batches", pool_batches_py, METH_NOARGS,
     "pool_batches() -> how many batches' matrices ran on the registered pool"},
    {"rows_dot", (PyCFunction)(void (*)(void))rows_dot, METH_FASTCALL,
     "rows_dot(x, v, out, pool=0) -> bool: out = x v, float32 rows, the compiled stage 1's "
     "kernel for products of few rows (False: not on this CPU)"},
    {"set_blas_pool", (PyCFunction)(void (*)(void))set_blas_pool, METH_FASTCALL,
     "set_blas_pool(pthread, num_threads): numpy's OpenBLAS threads for the helper's products"},
    {"blas_shares", blas_shares_py, METH_NOARGS,
     "blas_shares() -> how many shares of the helper's products ran on OpenBLAS's threads"},
    {"gemv16", (PyCFunction)(void (*)(void))gemv16_py, METH_FASTCALL,
     "gemv16(x, v, out, isa=-1, f16=0, pool=0) -> isa: out = x v, 16-bit rows, float32 "
     "accumulation"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastc",
                                    "The Freivalds check's per-call O(n) work, compiled.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__fastc(void) {
    pthread_atfork(NULL, NULL, entropy_forget);
    /* the attribute and keyword names the calls use */
    const struct { const char *name; PyObject **slot; } names[] = {
        {"_version", &str_version}, {"data_ptr", &str_data_ptr},
        {"_check_linear_py", &gs_check_py}, {"_linear_now_py", &gs_now_py},
        {"_linear_rest", &gs_rest_py}, {"_new_signs", &gs_new_signs}, {"nbytes", &gs_nbytes},
        {"dtype", &str_dtype}, {"_v", &str_v}, {"seconds", &str_seconds}, {"seed", &str_seed},
        {"_resume", &str_resume}, {"__qualname__", &str_qualname}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if ((*names[i].slot = PyUnicode_InternFromString(names[i].name)) == NULL) return NULL;
    if (PyType_Ready(&GuardCoreType) < 0 || PyType_Ready(&FrontType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && (PyModule_AddObjectRef(m, "GuardCore", (PyObject *)&GuardCoreType) < 0
                      || PyModule_AddObjectRef(m, "Front", (PyObject *)&FrontType) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    /* the most rows the compiled stage 1 makes with rows_dot's kernel (and when the CPU
     * has it: FEW_ROWS_KERNEL), and the most elements (A, B and C together) of a float32
     * batch's matrices whose products are always the helper's own (see own_batch) */
    if (m != NULL && (PyModule_AddIntConstant(m, "FEW_ROWS", FUSED_MAX_ROWS) < 0
                      || PyModule_AddIntConstant(m, "FEW_ROWS_KERNEL", f32_rows_ss_ok()) < 0
                      || PyModule_AddIntConstant(m, "OWN_BATCH_MAX_ELEMS",
                                                 OWN_BATCH_MAX_ELEMS) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
