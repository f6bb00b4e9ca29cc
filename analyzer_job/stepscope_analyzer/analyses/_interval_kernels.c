/* The interval analyses' kernels: searchsorted(side="right") of many keys into one sorted float64 array, the
 * coverage of sorted intervals that follows from it, the pieces of one interval set in or outside another, the
 * time each level of a ranked set of intervals owns first, per name the sums of bottlenecks.per_name, one
 * coarsening pass over a step's timeline (step_spans._pass), and what nested events' direct children cover
 * (self_times._children).
 *
 * numpy's searchsorted halves the whole array for every key. The analyses' keys mostly come in increasing runs
 * (interval starts grouped by name and sorted within each name, the boundaries of a sorted interval set), so this
 * searches each key from the previous key's answer: galloping forward (1, 2, 4, ... elements) while the keys
 * increase, a bisection below the previous answer when they drop. Same answers as numpy's, NaN included (numpy
 * sorts NaN after every number: the LT below is its ordering). The search runs without the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* numpy's float ordering: NaN after every number, NaNs equal among themselves. */
#define LT(a, b) ((a) < (b) || ((b) != (b) && (a) == (a)))

/* The first index in [lo, hi) whose value `key` is LT, else hi. */
static size_t first_above(const double *a, size_t lo, size_t hi, double key) {
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (LT(key, a[mid])) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return lo;
}

/* The number of values in a <= key, given the answer `prev` for an earlier key `before` (none when `first`). */
static size_t search_from(const double *a, size_t n, double key, double before, size_t prev, int first) {
    if (first) {
        return first_above(a, 0, n, key);
    }
    if (LT(key, before)) {
        return first_above(a, 0, prev, key); /* a smaller key: its answer is at most the previous one */
    }
    size_t lo = prev; /* every value before the previous answer is <= the previous key <= this key */
    size_t hi = lo;
    size_t step = 1;
    while (hi < n && !LT(key, a[hi])) {
        lo = hi + 1;
        hi = n - lo > step ? lo + step : n;
        step *= 2;
    }
    return first_above(a, lo, hi, key);
}

/* The number of values in a <= x[i], given the previous key's (`prev`; ignored when i == 0). */
static size_t next_answer(const double *a, size_t n, const double *x, size_t i, size_t prev) {
    return search_from(a, n, x[i], i ? x[i - 1] : 0.0, prev, i == 0);
}

/* Sorted [starts, ends) pieces with cum (the lengths before each piece), and where the last query stood. */
typedef struct {
    const double *starts, *ends, *cum;
    size_t n;
    size_t prev;
    double before;
    int first;
} Cover;

/* The covered length in (-inf, x], searched from the last query's answer; as intervals.coverage_before. */
static double cover_before(Cover *c, double x) {
    c->prev = search_from(c->starts, c->n, x, c->before, c->prev, c->first);
    c->before = x;
    c->first = 0;
    if (c->prev == 0) {
        return 0.0;
    }
    size_t j = c->prev - 1;
    double e = c->ends[j];
    double end = x != x || e != e ? x + e : (x < e ? x : e); /* numpy's minimum: NaN propagates */
    double part = end - c->starts[j];
    return c->cum[j] + (part != part || part >= 0.0 ? part : 0.0); /* clip below at 0, NaN kept */
}

static void search(const double *a, size_t n, const double *x, size_t m, int64_t *out) {
    size_t prev = 0;
    for (size_t i = 0; i < m; i++) {
        prev = next_answer(a, n, x, i, prev);
        out[i] = (int64_t)prev;
    }
}

/* out[i] = the length of [starts, ends) pieces (disjoint, sorted) in (-inf, x[i]]: cum[j] (the lengths of the
 * pieces before j) plus the covered part of the piece j holding or preceding x[i]; as intervals.coverage_before
 * computes it with numpy (NaN in, NaN out). */
static void coverage(const double *starts, const double *ends, const double *cum, size_t n, const double *x,
                     size_t m, double *out) {
    Cover c = {starts, ends, cum, n, 0, 0.0, 1};
    for (size_t i = 0; i < m; i++) {
        out[i] = cover_before(&c, x[i]);
    }
}

/* How much of [a, b] the cover covers (the start searched first: the queries then only grow within a name). */
static double covered_part(Cover *c, double a, double b) {
    if (c->n == 0) {
        return 0.0;
    }
    double before = cover_before(c, a);
    return cover_before(c, b) - before;
}

/* Rows sorted by (name, start), the names starting at `first` (groups g: rows first[g] .. first[g + 1] - 1, the
 * last to n): per name the summed durations (total), the union of its intervals (merged: an interval that starts
 * after every earlier one of the name has ended begins a piece, touching ones join) and the part of that union the
 * compute pieces cover (covered); as bottlenecks._names_at_once computes them with numpy, in the same order. */
static void name_times(const double *s, const double *e, size_t n, const int64_t *first, size_t groups, Cover *c,
                       double *total, double *merged, double *covered) {
    for (size_t g = 0; g < groups; g++) {
        size_t lo = (size_t)first[g], hi = g + 1 < groups ? (size_t)first[g + 1] : n;
        double sum = 0.0, length = 0.0, over = 0.0;
        double ps = s[lo], pe = e[lo];
        for (size_t r = lo; r < hi; r++) {
            sum += e[r] - s[r];
            if (r > lo && s[r] > pe) {
                length += pe - ps;
                over += covered_part(c, ps, pe);
                ps = s[r];
                pe = e[r];
            } else if (e[r] > pe) {
                pe = e[r];
            }
        }
        length += pe - ps;
        over += covered_part(c, ps, pe);
        total[g] = sum;
        merged[g] = length;
        covered[g] = over;
    }
}

static PyObject *per_name_times(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer s, e, f, cs, ce, cc, tot, mer, cov;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*w*w*w*", &s, &e, &f, &cs, &ce, &cc, &tot, &mer, &cov)) {
        return NULL;
    }
    PyObject *result = NULL;
    size_t n = (size_t)s.len / sizeof(double), groups = (size_t)f.len / sizeof(int64_t);
    int ok = !(s.len % sizeof(double)) && e.len == s.len && !(f.len % sizeof(int64_t)) && !(cs.len % sizeof(double)) &&
             ce.len == cs.len && cc.len >= cs.len && tot.len == (Py_ssize_t)(groups * sizeof(double)) &&
             mer.len == tot.len && cov.len == tot.len && (groups == 0 || n > 0);
    for (size_t g = 0; ok && g < groups; g++) { /* group starts increasing, in range, the first at 0 */
        int64_t at = ((const int64_t *)f.buf)[g];
        ok = at >= 0 && (size_t)at < n && (g == 0 ? at == 0 : at > ((const int64_t *)f.buf)[g - 1]);
    }
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "name_times(s, e, first, cover_starts, cover_ends, cover_cum, total, merged, "
                                          "covered): float64 rows, int64 group starts (0 first, increasing, in range), "
                                          "float64 outputs one per group");
    } else {
        Cover c = {(const double *)cs.buf, (const double *)ce.buf, (const double *)cc.buf,
                   (size_t)cs.len / sizeof(double), 0, 0.0, 1};
        Py_BEGIN_ALLOW_THREADS
        name_times((const double *)s.buf, (const double *)e.buf, n, (const int64_t *)f.buf, groups, &c,
                   (double *)tot.buf, (double *)mer.buf, (double *)cov.buf);
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&s);
    PyBuffer_Release(&e);
    PyBuffer_Release(&f);
    PyBuffer_Release(&cs);
    PyBuffer_Release(&ce);
    PyBuffer_Release(&cc);
    PyBuffer_Release(&tot);
    PyBuffer_Release(&mer);
    PyBuffer_Release(&cov);
    return result;
}

static PyObject *coverage_before(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer s, e, c, x, out;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*", &s, &e, &c, &x, &out)) {
        return NULL;
    }
    PyObject *result = NULL;
    if (s.len % sizeof(double) || e.len != s.len || c.len < s.len || x.len % sizeof(double) || out.len != x.len) {
        PyErr_SetString(PyExc_ValueError, "coverage_before(starts, ends, cum, x, out): float64 buffers; ends as "
                                          "long as starts, cum at least as long, out as long as x");
    } else {
        size_t n = (size_t)s.len / sizeof(double);
        size_t m = (size_t)x.len / sizeof(double);
        Py_BEGIN_ALLOW_THREADS
        coverage((const double *)s.buf, (const double *)e.buf, (const double *)c.buf, n, (const double *)x.buf, m,
                 (double *)out.buf);
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&s);
    PyBuffer_Release(&e);
    PyBuffer_Release(&c);
    PyBuffer_Release(&x);
    PyBuffer_Release(&out);
    return result;
}

/* The next boundary of a set at or after index i of its starts and ends (INFINITY when none is left). */
static double head(const double *v, size_t i, size_t n) { return i < n ? v[i] : INFINITY; }

/* The pieces of A (starts as, ends ae; disjoint, sorted) that lie in B (keep_in_b) or outside it, touching pieces
 * joined: one sweep over both sets' boundaries in order, counting at each distinct point the intervals of each set
 * that cover what follows it. The same sets as intervals._pieces computes with numpy (a point between two boundaries
 * belongs to an interval when start <= point < end). Returns the number of pieces written to out_s / out_e (room
 * for na + nb + 1), or -1 at a NaN (numpy decides then). */
static Py_ssize_t pieces(const double *as, const double *ae, size_t na, const double *bs, const double *be, size_t nb,
                         int keep_in_b, double *out_s, double *out_e) {
    size_t i = 0, j = 0, k = 0, l = 0; /* next start and end of A, of B */
    long ca = 0, cb = 0;               /* intervals of A, of B covering what follows the current point */
    Py_ssize_t count = 0;
    int open = 0;
    while (i < na || j < na || k < nb || l < nb) {
        double p = fmin(fmin(head(as, i, na), head(ae, j, na)), fmin(head(bs, k, nb), head(be, l, nb)));
        size_t before = i + j + k + l;
        for (; i < na && as[i] == p; i++) {
            ca++;
        }
        for (; j < na && ae[j] == p; j++) {
            ca--;
        }
        for (; k < nb && bs[k] == p; k++) {
            cb++;
        }
        for (; l < nb && be[l] == p; l++) {
            cb--;
        }
        if (i + j + k + l == before) {
            return -1; /* a NaN (equal to nothing, below nothing) holds a head back */
        }
        int keep = ca > 0 && (keep_in_b ? cb > 0 : cb <= 0);
        if (keep && !open) {
            out_s[count] = p;
            open = 1;
        } else if (!keep && open) {
            out_e[count++] = p;
            open = 0;
        }
    }
    return count; /* every count is back to 0 after the last boundary: nothing is open */
}

static PyObject *set_pieces(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer as, ae, bs, be, os, oe;
    int keep_in_b;
    if (!PyArg_ParseTuple(args, "y*y*y*y*pw*w*", &as, &ae, &bs, &be, &keep_in_b, &os, &oe)) {
        return NULL;
    }
    PyObject *result = NULL;
    size_t na = (size_t)as.len / sizeof(double), nb = (size_t)bs.len / sizeof(double);
    if (as.len % sizeof(double) || ae.len != as.len || bs.len % sizeof(double) || be.len != bs.len ||
        os.len != oe.len || (size_t)os.len < (na + nb + 1) * sizeof(double)) {
        PyErr_SetString(PyExc_ValueError, "pieces(a_starts, a_ends, b_starts, b_ends, keep_in_b, out_starts, "
                                          "out_ends): float64 buffers, ends as long as starts, room for "
                                          "len(a) + len(b) + 1 pieces");
    } else {
        Py_ssize_t count;
        Py_BEGIN_ALLOW_THREADS
        count = pieces((const double *)as.buf, (const double *)ae.buf, na, (const double *)bs.buf,
                       (const double *)be.buf, nb, keep_in_b, (double *)os.buf, (double *)oe.buf);
        Py_END_ALLOW_THREADS
        result = PyLong_FromSsize_t(count);
    }
    PyBuffer_Release(&as);
    PyBuffer_Release(&ae);
    PyBuffer_Release(&bs);
    PyBuffer_Release(&be);
    PyBuffer_Release(&os);
    PyBuffer_Release(&oe);
    return result;
}

/* Intervals each with a level, as their boundaries in time order (points; delta +1 at a start, -1 at an end; at: the
 * level): the runs of time each level owns (the first level with an interval open there), written as (out_s, out_e,
 * out_level) in time order, a level's touching runs joined. The same runs as intervals.by_first_level computes with
 * numpy. Returns their count, or -1 (a NaN point, a level out of range, no memory) for numpy to decide. */
static Py_ssize_t first_level(const double *points, const int64_t *delta, const int64_t *at, size_t n, int64_t levels,
                              double *out_s, double *out_e, int64_t *out_level) {
    int64_t *open = calloc((size_t)levels + 1, sizeof(int64_t)); /* intervals open per level */
    if (open == NULL) {
        return -1;
    }
    Py_ssize_t count = 0;
    int64_t owner = -1;
    double since = 0.0;
    size_t i = 0;
    while (i < n) {
        double p = points[i];
        if (p != p) {
            count = -1;
            break;
        }
        for (; i < n && points[i] == p; i++) {
            if (at[i] < 0 || at[i] >= levels) {
                free(open);
                return -1;
            }
            open[at[i]] += delta[i];
        }
        int64_t now = 0;
        while (now < levels && open[now] <= 0) {
            now++;
        }
        now = now < levels ? now : -1;
        if (now != owner) {
            if (owner >= 0) {
                out_s[count] = since;
                out_e[count] = p;
                out_level[count++] = owner;
            }
            since = p;
            owner = now;
        }
    }
    free(open);
    return count;
}

static PyObject *levels_first(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer pts, dlt, at, os, oe, ol;
    long long levels;
    if (!PyArg_ParseTuple(args, "y*y*y*Lw*w*w*", &pts, &dlt, &at, &levels, &os, &oe, &ol)) {
        return NULL;
    }
    PyObject *result = NULL;
    if (pts.len % sizeof(double) || dlt.len != pts.len || at.len != pts.len || levels < 0 || os.len < pts.len ||
        oe.len != os.len || ol.len != os.len) {
        PyErr_SetString(PyExc_ValueError, "first_level(points, delta, at, levels, out_starts, out_ends, out_levels): "
                                          "float64 points, int64 delta and at as long, outputs as long at least");
    } else {
        Py_ssize_t count;
        size_t n = (size_t)pts.len / sizeof(double);
        Py_BEGIN_ALLOW_THREADS
        count = first_level((const double *)pts.buf, (const int64_t *)dlt.buf, (const int64_t *)at.buf, n,
                            (int64_t)levels, (double *)os.buf, (double *)oe.buf, (int64_t *)ol.buf);
        Py_END_ALLOW_THREADS
        result = PyLong_FromSsize_t(count);
    }
    PyBuffer_Release(&pts);
    PyBuffer_Release(&dlt);
    PyBuffer_Release(&at);
    PyBuffer_Release(&os);
    PyBuffer_Release(&oe);
    PyBuffer_Release(&ol);
    return result;
}

static PyObject *search_right(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer a, x, out;
    if (!PyArg_ParseTuple(args, "y*y*w*", &a, &x, &out)) {
        return NULL;
    }
    PyObject *result = NULL;
    if (a.len % sizeof(double) || x.len % sizeof(double) || out.len != x.len) { /* int64 out: as long as keys */
        PyErr_SetString(PyExc_ValueError, "search_right(values, keys, out): float64, float64 and int64 buffers, "
                                          "out as long as keys");
    } else {
        size_t n = (size_t)a.len / sizeof(double);
        size_t m = (size_t)x.len / sizeof(double);
        Py_BEGIN_ALLOW_THREADS
        search((const double *)a.buf, n, (const double *)x.buf, m, (int64_t *)out.buf);
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&a);
    PyBuffer_Release(&x);
    PyBuffer_Release(&out);
    return result;
}

/* One pass of step_spans._pass over a step's stretches (s, e, k) in time order: each stretch shorter than `least`
 * goes to its longer neighbour (the one before it, as it stands, against the next one, as it was), neighbours of one
 * phase join. Writes the stretches kept to (os, oe, ok); returns their count. The same steps as the Python loop, in
 * the same order, so the same doubles. */
static size_t coarsen_pass(const double *s, const double *e, const int64_t *k, size_t n, double least, double *os,
                           double *oe, int64_t *ok) {
    size_t kept = 0;
    int carrying = 0;
    double carry = 0.0; /* the start of short stretches handed on to the next one */
    for (size_t i = 0; i < n; i++) {
        double ps = carrying ? carry : s[i], pe = e[i];
        int64_t pk = k[i];
        carrying = 0;
        int short_ = pe - ps < least, has_next = i + 1 < n;
        if (short_ && kept && (!has_next || oe[kept - 1] - os[kept - 1] >= e[i + 1] - s[i + 1])) {
            oe[kept - 1] = pe;
        } else if (short_ && has_next) {
            carry = ps;
            carrying = 1;
        } else if (kept && ok[kept - 1] == pk) {
            oe[kept - 1] = pe;
        } else {
            os[kept] = ps;
            oe[kept] = pe;
            ok[kept++] = pk;
        }
    }
    return kept;
}

static PyObject *coarsen(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer s, e, k, os, oe, ok;
    double least;
    if (!PyArg_ParseTuple(args, "y*y*y*dw*w*w*", &s, &e, &k, &least, &os, &oe, &ok)) {
        return NULL;
    }
    PyObject *result = NULL;
    if (s.len % sizeof(double) || e.len != s.len || k.len != s.len || os.len < s.len || oe.len != os.len ||
        ok.len != os.len) {
        PyErr_SetString(PyExc_ValueError, "coarsen_pass(starts, ends, kinds, least, out_starts, out_ends, out_kinds): "
                                          "float64 starts and ends, int64 kinds as long, outputs as long at least");
    } else {
        size_t count;
        Py_BEGIN_ALLOW_THREADS
        count = coarsen_pass((const double *)s.buf, (const double *)e.buf, (const int64_t *)k.buf,
                             (size_t)s.len / sizeof(double), least, (double *)os.buf, (double *)oe.buf,
                             (int64_t *)ok.buf);
        Py_END_ALLOW_THREADS
        result = PyLong_FromSize_t(count);
    }
    PyBuffer_Release(&s);
    PyBuffer_Release(&e);
    PyBuffer_Release(&k);
    PyBuffer_Release(&os);
    PyBuffer_Release(&oe);
    PyBuffer_Release(&ok);
    return result;
}

/* self_times._children in one pass over events sorted by start (longer first; finite): an event's depth is its
 * index less the events ended by its start (`sorted_ends`, searched as the starts increase), its parent the latest
 * earlier event one level up; each parent loses the sum of its children's covers, summed in the children's order
 * from 0.0 as numpy.bincount sums them, so the same doubles. `depth_last` and `covered`: scratch of n (int64,
 * float64). */
static void nest_children(const double *starts, const double *ends, const double *sorted_ends, size_t n,
                          int64_t *depth_last, double *covered, double *own) {
    size_t closed = 0;
    for (size_t i = 0; i < n; i++) {
        depth_last[i] = -1;
        covered[i] = 0.0;
    }
    for (size_t i = 0; i < n; i++) {
        while (closed < n && sorted_ends[closed] <= starts[i]) {
            closed++;
        }
        size_t depth = i - closed; /* closed <= i: only earlier events end by this start */
        if (depth >= 1 && depth_last[depth - 1] >= 0) {
            size_t parent = (size_t)depth_last[depth - 1];
            double end = ends[i] <= ends[parent] ? ends[i] : ends[parent];
            double cover = end - starts[i];
            covered[parent] += cover >= 0.0 ? cover : 0.0;
        }
        depth_last[depth] = (int64_t)i;
    }
    for (size_t i = 0; i < n; i++) {
        own[i] -= covered[i];
    }
}

static PyObject *children_cover(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer s, e, se, dl, cv, own;
    if (!PyArg_ParseTuple(args, "y*y*y*w*w*w*", &s, &e, &se, &dl, &cv, &own)) {
        return NULL;
    }
    PyObject *result = NULL;
    if (s.len % sizeof(double) || e.len != s.len || se.len != s.len || dl.len != s.len || cv.len != s.len ||
        own.len != s.len) {
        PyErr_SetString(PyExc_ValueError, "children(starts, ends, sorted_ends, depth_last, covered, own): float64 "
                                          "buffers and an int64 one, all as long");
    } else {
        Py_BEGIN_ALLOW_THREADS
        nest_children((const double *)s.buf, (const double *)e.buf, (const double *)se.buf,
                      (size_t)s.len / sizeof(double), (int64_t *)dl.buf, (double *)cv.buf, (double *)own.buf);
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&s);
    PyBuffer_Release(&e);
    PyBuffer_Release(&se);
    PyBuffer_Release(&dl);
    PyBuffer_Release(&cv);
    PyBuffer_Release(&own);
    return result;
}

static PyMethodDef methods[] = {
    {"search_right", search_right, METH_VARARGS,
     "search_right(values, keys, out): out[i] = the number of values <= keys[i] (values sorted; float64, float64, "
     "int64 buffers), as numpy.searchsorted(values, keys, side='right')."},
    {"coverage_before", coverage_before, METH_VARARGS,
     "coverage_before(starts, ends, cum, x, out): out[i] = the length of the disjoint sorted [starts, ends) pieces "
     "in (-inf, x[i]] (cum[j]: the lengths before piece j; float64 buffers)."},
    {"pieces", set_pieces, METH_VARARGS,
     "pieces(a_starts, a_ends, b_starts, b_ends, keep_in_b, out_starts, out_ends) -> count: A's pieces in B "
     "(keep_in_b) or outside it, touching ones joined, for disjoint sorted sets; -1 at a NaN."},
    {"first_level", levels_first, METH_VARARGS,
     "first_level(points, delta, at, levels, out_starts, out_ends, out_levels) -> count: the runs of time each "
     "level owns (the first level with an interval open), in time order; -1 for numpy to decide."},
    {"name_times", per_name_times, METH_VARARGS,
     "name_times(s, e, first, cover_starts, cover_ends, cover_cum, total, merged, covered): per name of rows sorted "
     "by (name, start), the summed durations, the union of its intervals and the part of it the cover covers."},
    {"children", children_cover, METH_VARARGS,
     "children(starts, ends, sorted_ends, depth_last, covered, own): own[i] less what event i's direct children "
     "cover, for events sorted by start (longer first), as self_times._children computes it with numpy."},
    {"coarsen_pass", coarsen, METH_VARARGS,
     "coarsen_pass(starts, ends, kinds, least, out_starts, out_ends, out_kinds) -> count: one pass of "
     "step_spans._pass (stretches shorter than least to their longer neighbour, one phase's neighbours joined)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_interval_kernels", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__interval_kernels(void) { return PyModule_Create(&module); }
