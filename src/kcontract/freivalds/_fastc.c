/* The Freivalds check's per-call O(n) work in one call each (optional, compiled at
 * install time; kcontract.freivalds._screen falls back to numpy when it is missing).
 *
 * After a large product has streamed through the caches every small numpy call costs
 * several microseconds, and the check made a dozen of them beside its three
 * matrix-vector products; these functions do the same arithmetic in one pass:
 *
 *   expand_signs(raw, n, out, kind) -> sum
 *       the first n bits of raw, most significant first, as +-1 (bit 1 -> -1) into out
 *       (kind 0: float32, 1: float64, 2: int8); returns the sum of the signs.
 *   screen_stats(z, w, kz, buf, k, k9, cblk, kc, ablk, ka, y, ky, rows)
 *       -> (max |d|, d_(k), d_(k9), sum c^2, sum a^2, sum y^2)
 *       (rows > 0: cblk and ablk hold that many rows, and the sums are of the largest row)
 *       d = |z - w| (w None: |z|) in float64 into buf[0:M] (z and w of kind kz), the order statistics
 *       k and k9 (k9 < 0: none) of d selected in a copy in buf[M:2M]; sums of squares in
 *       float64 of the blocks cblk, ablk and the vector y (kinds 0 float32, 1 float64,
 *       2 bfloat16 bits, 3 float16 bits).  Any NaN in d makes max |d| NaN.
 *   bf16_columns(v, out) -> exact
 *       a float32 vector as three bfloat16 parts (uint16 bits, K x 3, row-major) whose
 *       sum is v exactly (truncation: each part keeps the next 8 significant bits);
 *       returns 1 when v is exactly bfloat16 (then the first column alone is v).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

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

static Py_ssize_t count(const Py_buffer *b, int kind) {
    Py_ssize_t item = kind == 0 ? 4 : kind == 1 ? 8 : 2;
    return b->len / item;
}

static double sumsq_n(const void *buf, Py_ssize_t n, int kind);

/* sum of squares of the whole buffer (rowlen 0), or the largest over its rows */
static double sumsq(const Py_buffer *b, int kind, Py_ssize_t rowlen) {
    Py_ssize_t n = count(b, kind);
    if (rowlen <= 0 || rowlen >= n) return sumsq_n(b->buf, n, kind);
    Py_ssize_t item = kind == 0 ? 4 : kind == 1 ? 8 : 2;
    double best = 0.0;
    for (Py_ssize_t r = 0; r + rowlen <= n; r += rowlen) {
        double v = sumsq_n((const char *)b->buf + r * item, rowlen, kind);
        if (v > best || v != v) best = v;
    }
    return best;
}

static double sumsq_n(const void *buf, Py_ssize_t n, int kind) {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    Py_ssize_t i = 0;
    if (kind == 0) {
        const float *x = (const float *)buf;
        for (; i + 4 <= n; i += 4) {
            double a = x[i], c = x[i + 1], d = x[i + 2], e = x[i + 3];
            s0 += a * a; s1 += c * c; s2 += d * d; s3 += e * e;
        }
    } else if (kind == 1) {
        const double *x = (const double *)buf;
        for (; i + 4 <= n; i += 4) {
            s0 += x[i] * x[i]; s1 += x[i + 1] * x[i + 1];
            s2 += x[i + 2] * x[i + 2]; s3 += x[i + 3] * x[i + 3];
        }
    }
    for (; i < n; i++) {
        double v = elem(buf, kind, i);
        s0 += v * v;
    }
    return (s0 + s1) + (s2 + s3);
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

static PyObject *expand_signs(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "expand_signs(raw, n, out, kind)");
        return NULL;
    }
    Py_ssize_t n = PyLong_AsSsize_t(args[1]);
    long kind = PyLong_AsLong(args[3]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer raw, out;
    if (get(args[0], &raw, 0) < 0) return NULL;
    if (get(args[2], &out, 1) < 0) { PyBuffer_Release(&raw); return NULL; }
    Py_ssize_t item = kind == 0 ? 4 : kind == 1 ? 8 : 1;
    if (n < 0 || raw.len * 8 < n || out.len < n * item || kind < 0 || kind > 2) {
        PyBuffer_Release(&raw); PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, "expand_signs: buffers too small or bad kind");
        return NULL;
    }
    const unsigned char *r = (const unsigned char *)raw.buf;
    Py_ssize_t neg = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int bit = (r[i >> 3] >> (7 - (i & 7))) & 1;
        neg += bit;
        if (kind == 0) ((float *)out.buf)[i] = bit ? -1.0f : 1.0f;
        else if (kind == 1) ((double *)out.buf)[i] = bit ? -1.0 : 1.0;
        else ((int8_t *)out.buf)[i] = bit ? -1 : 1;
    }
    PyBuffer_Release(&raw); PyBuffer_Release(&out);
    return PyLong_FromSsize_t(n - 2 * neg);
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
    double *d = (double *)buf.buf, *tmp = d + M;
    double dmax = 0.0;
    int nan = 0;
    if (!have_w) {  /* z is |d| already */
        for (Py_ssize_t i = 0; i < M; i++) {
            double v = fabs(elem(z.buf, (int)kz, i));
            d[i] = v;
            if (v > dmax) dmax = v;
            else if (v != v) nan = 1;
        }
    } else if (kz == 0) {
        const float *zz = (const float *)z.buf, *ww = (const float *)w.buf;
        for (Py_ssize_t i = 0; i < M; i++) {
            double v = fabs((double)zz[i] - (double)ww[i]);
            d[i] = v;
            if (v > dmax) dmax = v;
            else if (v != v) nan = 1;
        }
    } else {
        const double *zz = (const double *)z.buf, *ww = (const double *)w.buf;
        for (Py_ssize_t i = 0; i < M; i++) {
            double v = fabs(zz[i] - ww[i]);
            d[i] = v;
            if (v > dmax) dmax = v;
            else if (v != v) nan = 1;
        }
    }
    double dk = NAN, dk9 = NAN;
    if (!nan && isfinite(dmax)) {
        memcpy(tmp, d, (size_t)M * sizeof(double));
        if (k9 >= 0) {  /* the larger statistic first: the smaller one is then left of it */
            dk9 = select_k(tmp, M, k9);
            dk = select_k(tmp, k9 + 1 > M ? M : k9 + 1, k);
        } else {
            dk = select_k(tmp, M, k);
        }
    } else if (nan) {
        dmax = NAN;
    }
    /* rows > 0: the blocks hold `rows` rows each and the largest row's sum is wanted */
    Py_ssize_t nc = count(&cb, (int)kc), na = count(&ab, (int)ka);
    double css = sumsq(&cb, (int)kc, rows > 0 ? nc / rows : 0);
    double ass = sumsq(&ab, (int)ka, rows > 0 ? na / rows : 0);
    double yss = sumsq(&yb, (int)ky, 0);
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

static PyObject *bf16_columns(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "bf16_columns(v, out)");
        return NULL;
    }
    Py_buffer v, out;
    if (get(args[0], &v, 0) < 0) return NULL;
    if (get(args[1], &out, 1) < 0) { PyBuffer_Release(&v); return NULL; }
    Py_ssize_t K = v.len / 4;
    if (out.len < K * 3 * 2) {
        PyBuffer_Release(&v); PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, "bf16_columns: out is too small");
        return NULL;
    }
    const uint32_t *u = (const uint32_t *)v.buf;
    uint16_t *o = (uint16_t *)out.buf;
    int exact = 1;
    for (Py_ssize_t i = 0; i < K; i++) {
        uint32_t x = u[i], hi = x & 0xFFFF0000u;
        float fx, fh, r1, fm, lo;
        memcpy(&fx, &x, 4); memcpy(&fh, &hi, 4);
        r1 = fx - fh;  /* exact: the bits below the top 8 */
        uint32_t ur1, mid, ulo;
        memcpy(&ur1, &r1, 4);
        mid = ur1 & 0xFFFF0000u;
        memcpy(&fm, &mid, 4);
        lo = r1 - fm;  /* exact, at most 8 significant bits */
        memcpy(&ulo, &lo, 4);
        o[3 * i] = (uint16_t)(hi >> 16);
        o[3 * i + 1] = (uint16_t)(mid >> 16);
        o[3 * i + 2] = (uint16_t)(ulo >> 16);
        if (x & 0xFFFFu) exact = 0;
    }
    PyBuffer_Release(&v); PyBuffer_Release(&out);
    return PyBool_FromLong(exact);
}

static PyMethodDef methods[] = {
    {"expand_signs", (PyCFunction)(void (*)(void))expand_signs, METH_FASTCALL,
     "expand_signs(raw, n, out, kind) -> sum of the signs"},
    {"screen_stats", (PyCFunction)(void (*)(void))screen_stats, METH_FASTCALL,
     "screen_stats(z, w, kz, buf, k, k9, cblk, kc, ablk, ka, y, ky, rows) -> 6 floats"},
    {"bf16_columns", (PyCFunction)(void (*)(void))bf16_columns, METH_FASTCALL,
     "bf16_columns(v, out) -> whether v is exactly bfloat16"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastc",
                                    "The Freivalds check's per-call O(n) work, compiled.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__fastc(void) { return PyModule_Create(&module); }
