/* The parser's native fast path: one chunk of a Chrome trace's `traceEvents` array -> columns.
 *
 * scan(chunk) takes the text of a JSON array of events (the splitter's chunk) and returns the columns of its complete
 * events, or None when the chunk holds anything outside the common shape this scanner accepts: then the caller
 * decodes the chunk with the Python path (msgspec / orjson), which also owns every error message. The contract is
 * that for every chunk this returns columns for, they equal what the Python path builds (tests/analyzer_job/parse:
 * differential tests on real traces, generated events and a fuzz target). So this file only has to be right about
 * what it accepts, and it accepts only:
 *   - strictly valid JSON (RFC 8259 grammar; strings without \u escapes and without control characters; nesting at
 *     most MAX_DEPTH deep), an array whose elements are all objects;
 *   - each event's known keys (ph cat name pid tid ts dur args) at most once, without escapes, with the types the
 *     common traces use: ph a known one-letter phase; cat and name strings without escapes; pid and tid integers
 *     (or null, or integral floats); ts and dur numbers (or null); args an object (or null) whose known keys
 *     (stream, correlation, External id, name) are numbers or null (name: anything);
 *   - integers within int64, finite floats;
 *   - the allocator's `[memory]` events (profile_memory): their ts and numbers (Total Allocated, Total Reserved,
 *     Device Type) read here where they are plain numbers or null, else (for the whole chunk) their ts and args texts
 *     joined into one JSON array, decoded in Python in one call.
 * Values of other keys are validated and skipped. Strings are not checked for UTF-8 except names and categories
 * that become columns (decoded strictly; the Python path replaces bad bytes, so such a chunk goes there).
 * The scan itself runs without the GIL (another thread inflates the next blocks meanwhile).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Small functions called per value, inlined even where the compiler would not (a call per row and column). */
#if defined(__GNUC__)
#define HOT inline __attribute__((always_inline))
#else
#define HOT inline
#endif

#define MAX_DEPTH 64
#define MAX_NUMBER_CHARS 64
/* Floats at least this large convert to integers beyond int64 in the Python path (a TraceError there). */
#define INT64_FLOAT_LIMIT 9.2e18

typedef struct {
    char *data;
    size_t len;
    size_t cap;
} Buf;

static int buf_grow(Buf *b, size_t n) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n) {
        cap *= 2;
    }
    char *grown = realloc(b->data, cap);
    if (grown == NULL) {
        return 0;
    }
    b->data = grown;
    b->cap = cap;
    return 1;
}

static HOT int buf_put(Buf *b, const void *src, size_t n) {
    if (b->len + n > b->cap && !buf_grow(b, n)) {
        return 0;
    }
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return 1;
}

typedef struct {
    const char *ptr;
    size_t len;
} Span;

/* Interned spans (names or categories), numbered in order of first appearance. */
typedef struct {
    Span *spans;   /* by id */
    size_t count;
    size_t spans_cap;
    int32_t *slots; /* open addressing: id + 1, 0 = empty */
    size_t slots_cap;
} Table;

/* Eight bytes per round (names run to hundreds of bytes: GPU kernels' template signatures); the last step folds
 * the high bits into the low ones, which pick the slot. */
static uint64_t hash_span(const char *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, sizeof w);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
    }
    uint64_t w = 0;
    memcpy(&w, p + i, n - i);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ULL;
    return h ^ (h >> 29);
}

static int table_grow(Table *t) {
    size_t cap = t->slots_cap ? t->slots_cap * 2 : 256;
    int32_t *slots = calloc(cap, sizeof(int32_t));
    if (slots == NULL) {
        return 0;
    }
    for (size_t id = 0; id < t->count; id++) {
        size_t i = (size_t)hash_span(t->spans[id].ptr, t->spans[id].len) & (cap - 1);
        while (slots[i]) {
            i = (i + 1) & (cap - 1);
        }
        slots[i] = (int32_t)(id + 1);
    }
    free(t->slots);
    t->slots = slots;
    t->slots_cap = cap;
    return 1;
}

/* The id of `s` (a new one when unseen); -1 when out of memory or ids. */
static int32_t table_id(Table *t, Span s) {
    if ((t->count + 1) * 2 > t->slots_cap && !table_grow(t)) {
        return -1;
    }
    size_t i = (size_t)hash_span(s.ptr, s.len) & (t->slots_cap - 1);
    while (t->slots[i]) {
        Span *known = &t->spans[t->slots[i] - 1];
        if (known->len == s.len && memcmp(known->ptr, s.ptr, s.len) == 0) {
            return t->slots[i] - 1;
        }
        i = (i + 1) & (t->slots_cap - 1);
    }
    if (t->count >= INT32_MAX - 1) {
        return -1;
    }
    if (t->count == t->spans_cap) {
        size_t cap = t->spans_cap ? t->spans_cap * 2 : 64;
        Span *grown = realloc(t->spans, cap * sizeof(Span));
        if (grown == NULL) {
            return -1;
        }
        t->spans = grown;
        t->spans_cap = cap;
    }
    t->spans[t->count] = s;
    t->slots[i] = (int32_t)(t->count + 1);
    return (int32_t)t->count++;
}

static void table_free(Table *t) {
    free(t->spans);
    free(t->slots);
}

typedef struct {
    const char *p;
    const char *end;
} Cur;

/* Value kinds of the fields the scanner reads. */
enum { ABSENT = 0, NUL = 1, INT = 2, FLOAT = 3, STR = 4, OTHER = 5 };

typedef struct {
    int kind;
    int64_t i;
    double f;
    Span s;
} Value;

/* The text between one member's value and the next member's value within an object (whitespace, ',', the key, ':')
 * as last seen at that member's position, with the key's code: Kineto writes every event with the same layout, so
 * comparing the text ahead with the remembered gap (a few word compares) replaces scanning the separator and the key
 * byte by byte, whose data-dependent loop exits cost most of the scan. Two ways per position: events of two layouts
 * (complete events, flow events) interleave. */
typedef struct {
    const char *ptr; /* into the chunk's text, alive for the whole scan */
    size_t len;
    int key;
} Gap;

typedef struct {
    Gap way[2];
} GapSlot;

#define GAP_SLOTS 16
#define MAX_GAP 64

typedef struct {
    Buf ts_i, ts_f, dur_i, dur_f, name, cat, pid, tid, stream, corr, ext;
    Buf coll;    /* (int64 row, int64 start, int64 end) of collective rows' args objects */
    Buf threads; /* (int64 pid, int64 tid, int64 start, int64 len) of thread_name metadata */
    Buf memory;  /* (double ts, int64 start, int64 end) of the allocator's [memory] events' args objects */
    Buf memnum;  /* (double ts, double allocated, double reserved, int64 device) of the same events, read here */
    int memtext; /* some [memory] event's args are not read here: all of the chunk's go to Python as text */
    Table names, cats;
    GapSlot event_gaps[GAP_SLOTS], args_gaps[GAP_SLOTS];
    int ts_float, dur_float;
    int64_t events, rows;
    int oom;
    const char *base; /* the chunk's first byte: spans are kept as offsets from it */
} Out;

static const unsigned char WS[256] = {[' '] = 1, ['\n'] = 1, ['\r'] = 1, ['\t'] = 1};

static inline void ws(Cur *c) {
    const char *p = c->p;
    while (p < c->end && WS[(unsigned char)*p]) {
        p++;
    }
    c->p = p;
}

/* Bytes that end a string's plain run: '"', '\\' and control characters. */
static unsigned char STOP[256];

static void init_stop(void) {
    for (int i = 0; i < 0x20; i++) {
        STOP[i] = 1;
    }
    STOP['"'] = 1;
    STOP['\\'] = 1;
}

/* A string at c->p (a '"'); its content's span and whether it holds escapes. 0: outside the fast path. */
static int scan_string(Cur *c, Span *out, int *escaped) {
    const char *p = c->p + 1;
    const char *end = c->end;
    *escaped = 0;
    while (p < end) {
        while (p < end && !STOP[(unsigned char)*p]) {
            p++;
        }
        if (p >= end) {
            break;
        }
        unsigned char ch = (unsigned char)*p;
        if (ch == '"') {
            out->ptr = c->p + 1;
            out->len = (size_t)(p - (c->p + 1));
            c->p = p + 1;
            return 1;
        }
        if (ch == '\\') {
            if (p + 1 >= end) {
                return 0;
            }
            char e = p[1];
            if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n' && e != 'r' && e != 't') {
                return 0; /* u-escapes (surrogates and all) and invalid escapes: the Python path */
            }
            *escaped = 1;
            p += 2;
            continue;
        }
        if (ch < 0x20) {
            return 0;
        }
        p++;
    }
    return 0;
}

static int is_digit(char ch) { return ch >= '0' && ch <= '9'; }

/* Past one or more digits at p; NULL when there is none. */
static const char *past_digits(const char *p, const char *end) {
    if (p >= end || !is_digit(*p)) {
        return NULL;
    }
    while (p < end && is_digit(*p)) {
        p++;
    }
    return p;
}

/* Powers of ten that are exact doubles (5^22 < 2^53). */
static const double POW10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
#define MAX_EXACT_POW10 22

/* The value of a valid JSON number [s, end) when its significant digits form an integer w <= 2^53 and its decimal
 * exponent q is within +-22: then w and 10^|q| are exact doubles and the one multiplication or division by 10^|q|
 * rounds correctly (Clinger's fast path), so the result is strtod's to the bit. Recent torch versions write every
 * event's ts and dur with a fraction ("ts": 4481693927634.424): strtod, which copies and parses each in several
 * passes, made a trace of such numbers scan 1.45x slower than one of integers. 0: not this case (strtod decides). */
static int exact_float(const char *s, const char *end, double *out) {
#if FLT_EVAL_METHOD == 0 /* double arithmetic rounds once (not on x87's wider registers) */
    int negative = *s == '-';
    s += negative;
    uint64_t w = 0; /* the significant digits: exact while at most 19 of them (10^19 < 2^64) */
    int significant = 0, scale = 0;
    for (int fraction = 0; s < end; s++) {
        if (*s == '.' && !fraction) {
            fraction = 1;
            continue;
        }
        if (!is_digit(*s)) {
            break;
        }
        w = w * 10 + (uint64_t)(*s - '0');
        significant += significant > 0 || *s != '0'; /* leading zeros are not significant */
        scale -= fraction;
        if (significant > 19) {
            return 0;
        }
    }
    if (w > (1ULL << 53)) {
        return 0;
    }
    if (s < end) { /* an exponent */
        s++;
        int exp_negative = *s == '-';
        s += *s == '-' || *s == '+';
        int e = 0;
        for (; s < end && is_digit(*s); s++) {
            if (e > 1000) {
                return 0;
            }
            e = e * 10 + (*s - '0');
        }
        scale += exp_negative ? -e : e;
    }
    if (scale < -MAX_EXACT_POW10 || scale > MAX_EXACT_POW10) {
        return 0;
    }
    double f = (double)w;
    f = scale < 0 ? f / POW10[-scale] : f * POW10[scale];
    *out = negative ? -f : f;
    return 1;
#else
    (void)s;
    (void)end;
    (void)out;
    return 0;
#endif
}

/* A JSON number at c->p: an int64 (INT) or a finite double (FLOAT). 0: invalid, out of range or not finite. */
static int scan_number(Cur *c, Value *v) {
    const char *start = c->p;
    const char *p = start;
    const char *end = c->end;
    int negative = 0;
    if (p < end && *p == '-') {
        negative = 1;
        p++;
    }
    if (p >= end || !is_digit(*p)) {
        return 0;
    }
    const char *digits = p;
    uint64_t acc = 0; /* exact while at most 19 digits: checked below */
    if (*p == '0') {
        p++;
    } else {
        while (p < end && is_digit(*p)) {
            acc = acc * 10 + (uint64_t)(*p - '0');
            p++;
        }
    }
    int is_float = 0;
    if (p < end && *p == '.') {
        is_float = 1;
        p = past_digits(p + 1, end);
        if (p == NULL) {
            return 0;
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        is_float = 1;
        p++;
        if (p < end && (*p == '+' || *p == '-')) {
            p++;
        }
        p = past_digits(p, end);
        if (p == NULL) {
            return 0;
        }
    }
    if (p < end && is_digit(*p)) {
        return 0; /* a leading zero followed by digits */
    }
    c->p = p;
    if (!is_float) {
        if (p - digits > 19) {
            return 0; /* 19 digits fit in 64 bits unsigned, more may not */
        }
        uint64_t limit = negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
        if (acc > limit) {
            return 0;
        }
        v->kind = INT;
        v->i = negative ? (int64_t)(0 - acc) : (int64_t)acc;
        return 1;
    }
    size_t n = (size_t)(p - start);
    if (n >= MAX_NUMBER_CHARS) {
        return 0;
    }
    if (exact_float(start, p, &v->f)) {
        v->kind = FLOAT;
        return 1;
    }
    char text[MAX_NUMBER_CHARS];
    memcpy(text, start, n);
    text[n] = '\0';
    char *stop = NULL;
    double f = strtod(text, &stop);
    if (stop != text + n || !isfinite(f)) {
        return 0;
    }
    v->kind = FLOAT;
    v->f = f;
    return 1;
}

static int literal(Cur *c, const char *word, size_t n) {
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0) {
        return 0;
    }
    c->p += n;
    return 1;
}

/* After whitespace: 2 when `close` is at c->p (skipped), 1 when something else is, 0 at the end of the text. */
static int closes(Cur *c, char close) {
    ws(c);
    if (c->p >= c->end) {
        return 0;
    }
    if (*c->p == close) {
        c->p++;
        return 2;
    }
    return 1;
}

/* After a member or element: 1 when a ',' and more text follow (c->p past them and the whitespace after), 2 when
 * `close` does (skipped), 0 otherwise. */
static int next_or_close(Cur *c, char close) {
    int at = closes(c, close);
    if (at != 1) {
        return at;
    }
    if (*c->p != ',') {
        return 0;
    }
    c->p++;
    ws(c);
    return c->p < c->end;
}

/* An object member's key and the ':' after it (whitespace skipped up to its value); `escaped` says whether the
 * key holds escapes. 0: not a key. */
static int member_key(Cur *c, Span *k, int *escaped) {
    if (c->p >= c->end || *c->p != '"' || !scan_string(c, k, escaped)) {
        return 0;
    }
    ws(c);
    if (c->p >= c->end || *c->p != ':') {
        return 0;
    }
    c->p++;
    ws(c);
    return c->p < c->end;
}

/* Past an opening bracket: 1 when a member or element follows (c->p on it), 2 when `close` follows at once
 * (skipped), 0 at the end of the text. */
static int open_container(Cur *c, char close) {
    c->p++;
    return closes(c, close);
}

/* Whether n bytes at a equal those at b (n <= MAX_GAP), by 8-byte words (the last one overlapping). */
static HOT int same_bytes(const char *a, const char *b, size_t n) {
    uint64_t x, y;
    if (n < 8) {
        uint64_t diff = 0;
        for (size_t i = 0; i < n; i++) {
            diff |= (uint64_t)(a[i] ^ b[i]);
        }
        return diff == 0;
    }
    size_t i = 0;
    for (; i + 8 < n; i += 8) {
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        if (x != y) {
            return 0;
        }
    }
    memcpy(&x, a + n - 8, 8);
    memcpy(&y, b + n - 8, 8);
    return x == y;
}

/* When the text at c->p starts with a gap remembered at this position and a value follows: c->p past the gap and
 * the whitespace after it, and the key's code; else -1 (nothing consumed). A match is the same bytes that were a
 * valid separator and key. */
static HOT int predicted_key(Cur *c, const GapSlot *slot) {
    const char *at = c->p;
    size_t left = (size_t)(c->end - at);
    for (int w = 0; w < 2; w++) {
        const Gap *g = &slot->way[w];
        if (g->len && g->len <= left && same_bytes(at, g->ptr, g->len)) {
            c->p = at + g->len;
            ws(c);
            if (c->p < c->end) {
                return g->key;
            }
            c->p = at; /* the text ends after the key: the general path says so */
            return -1;
        }
    }
    return -1;
}

static void remember_gap(GapSlot *slot, const char *start, const char *end, int key) {
    size_t len = (size_t)(end - start);
    if (len == 0 || len > MAX_GAP) {
        return;
    }
    slot->way[1] = slot->way[0];
    slot->way[0] = (Gap){start, len, key};
}

/* Any JSON value, validated and skipped. */
static int skip_value(Cur *c, int depth) {
    if (c->p >= c->end || depth > MAX_DEPTH) {
        return 0;
    }
    Span s;
    int escaped;
    Value v;
    switch (*c->p) {
    case '"':
        return scan_string(c, &s, &escaped);
    case 't':
        return literal(c, "true", 4);
    case 'f':
        return literal(c, "false", 5);
    case 'n':
        return literal(c, "null", 4);
    case '{': {
        int more = open_container(c, '}');
        while (more == 1) {
            if (!member_key(c, &s, &escaped) || !skip_value(c, depth + 1)) {
                return 0;
            }
            more = next_or_close(c, '}');
        }
        return more == 2;
    }
    case '[': {
        int more = open_container(c, ']');
        while (more == 1) {
            if (!skip_value(c, depth + 1)) {
                return 0;
            }
            more = next_or_close(c, ']');
        }
        return more == 2;
    }
    default:
        return scan_number(c, &v);
    }
}

/* A value that must be a number or null (anything else: outside the fast path). */
static int number_or_null(Cur *c, Value *v) {
    if (c->p < c->end && *c->p == 'n') {
        v->kind = NUL;
        return literal(c, "null", 4);
    }
    return scan_number(c, v);
}

static int key_is(Span k, const char *word) {
    size_t n = strlen(word);
    return k.len == n && memcmp(k.ptr, word, n) == 0;
}

enum { K_OTHER, K_PH, K_CAT, K_NAME, K_PID, K_TID, K_TS, K_DUR, K_ARGS };

/* An event's key, told by its length first. */
static int event_key(Span k) {
    switch (k.len) {
    case 2:
        return memcmp(k.ptr, "ph", 2) == 0 ? K_PH : memcmp(k.ptr, "ts", 2) == 0 ? K_TS : K_OTHER;
    case 3:
        if (memcmp(k.ptr, "cat", 3) == 0) {
            return K_CAT;
        }
        if (memcmp(k.ptr, "pid", 3) == 0) {
            return K_PID;
        }
        if (memcmp(k.ptr, "tid", 3) == 0) {
            return K_TID;
        }
        return memcmp(k.ptr, "dur", 3) == 0 ? K_DUR : K_OTHER;
    case 4:
        return memcmp(k.ptr, "name", 4) == 0 ? K_NAME : memcmp(k.ptr, "args", 4) == 0 ? K_ARGS : K_OTHER;
    default:
        return K_OTHER;
    }
}

/* An integer field as the Python path reads it: int as is; null or absent: -1; integral float: its int. */
static int int_field(const Value *v, int64_t *out) {
    switch (v->kind) {
    case ABSENT:
    case NUL:
        *out = -1;
        return 1;
    case INT:
        *out = v->i;
        return 1;
    case FLOAT:
        if (v->f == floor(v->f) && fabs(v->f) < INT64_FLOAT_LIMIT) {
            *out = (int64_t)v->f;
            return 1;
        }
        return 0;
    default:
        return 0;
    }
}

/* correlation / External id: int; integral float: its int; any other float, null or absent: -1. 0: outside the
 * fast path (an integral float beyond int64). */
static int id_field(const Value *v, int64_t *out) {
    *out = -1;
    if (v->kind == INT) {
        *out = v->i;
    } else if (v->kind == FLOAT && v->f == floor(v->f)) {
        if (fabs(v->f) >= INT64_FLOAT_LIMIT) {
            return 0;
        }
        *out = (int64_t)v->f;
    }
    return 1;
}

/* stream: int; float: truncated toward zero; null or absent: -1. 0: outside the fast path (beyond int64). */
static int stream_field(const Value *v, int64_t *out) {
    *out = -1;
    if (v->kind == INT) {
        *out = v->i;
    } else if (v->kind == FLOAT) {
        if (fabs(v->f) >= INT64_FLOAT_LIMIT) {
            return 0;
        }
        *out = (int64_t)v->f;
    }
    return 1;
}

typedef struct {
    Value stream, corr, ext, name;
    int coll;
    const char *start, *end;
} Args;

enum { A_OTHER, A_STREAM, A_CORR, A_EXT, A_NAME, A_COLL, A_PG };

static int args_key(Span k) {
    return key_is(k, "stream")               ? A_STREAM
           : key_is(k, "correlation")        ? A_CORR
           : key_is(k, "External id")        ? A_EXT
           : key_is(k, "name")               ? A_NAME
           : key_is(k, "Collective name")    ? A_COLL
           : key_is(k, "Process Group Name") ? A_PG
                                             : A_OTHER;
}

/* The next member's key code (c->p on its value), -2 when the object closes (skipped), -1 when not valid here. */
static HOT int next_key(Cur *c, GapSlot *gaps, int i, int (*code)(Span)) {
    if (i < GAP_SLOTS) {
        int key = predicted_key(c, &gaps[i]);
        if (key >= 0) {
            return key;
        }
    }
    const char *start = c->p;
    int more = i == 0 ? closes(c, '}') : next_or_close(c, '}');
    if (more != 1) {
        return more == 2 ? -2 : -1;
    }
    Span k;
    int escaped;
    if (!member_key(c, &k, &escaped) || escaped) {
        return -1;
    }
    int key = code(k);
    if (i < GAP_SLOTS) {
        remember_gap(&gaps[i], start, c->p, key);
    }
    return key;
}

static int scan_args(Cur *c, Args *a, GapSlot *gaps) {
    /* only the kinds: a value's other fields are read where its kind says they were set */
    a->stream.kind = a->corr.kind = a->ext.kind = a->name.kind = ABSENT;
    a->coll = 0;
    a->start = c->p;
    unsigned seen = 0;
    c->p++; /* the '{' */
    for (int i = 0;; i++) {
        int key = next_key(c, gaps, i, args_key);
        if (key < 0) {
            if (key == -1) {
                return 0;
            }
            break;
        }
        unsigned bit = 0;
        if (key == A_STREAM) {
            bit = 1;
            if ((seen & bit) || !number_or_null(c, &a->stream)) {
                return 0;
            }
        } else if (key == A_CORR) {
            bit = 2;
            if ((seen & bit) || !number_or_null(c, &a->corr)) {
                return 0;
            }
        } else if (key == A_EXT) {
            bit = 4;
            if ((seen & bit) || !number_or_null(c, &a->ext)) {
                return 0;
            }
        } else if (key == A_NAME) {
            bit = 8;
            if (seen & bit) {
                return 0;
            }
            if (*c->p == '"') {
                int esc;
                if (!scan_string(c, &a->name.s, &esc)) {
                    return 0;
                }
                a->name.kind = esc ? OTHER : STR; /* OTHER (escapes): outside the fast path only where it is used */
            } else {
                a->name.kind = NUL; /* not a string: no thread name */
                if (!skip_value(c, 2)) {
                    return 0;
                }
            }
        } else if (key == A_COLL || key == A_PG) {
            bit = key == A_COLL ? 16 : 32;
            if (seen & bit) {
                return 0;
            }
            int is_null = *c->p == 'n';
            if (!skip_value(c, 2)) {
                return 0;
            }
            a->coll |= !is_null;
        } else if (!skip_value(c, 2)) {
            return 0;
        }
        seen |= bit;
    }
    a->end = c->p;
    return 1;
}

/* A [memory] event's number, as MemoryArgs' float field decodes it: an int or a float (null: NaN, left out). 0:
 * anything else, or a sign (msgspec's -0 is left to it), for Python to decode. */
static int memory_float(Cur *c, double *out) {
    Value v;
    if (*c->p == '-' || !number_or_null(c, &v)) {
        return 0;
    }
    *out = v.kind == NUL ? NAN : v.kind == INT ? (double)v.i : v.f;
    return 1;
}

/* The numbers of a [memory] event's args object (validated JSON at [start, end)): Total Allocated and Total Reserved
 * (absent or null: NaN), Device Type (an int; absent or null: 0), as MEMORY_ARGS_DECODER reads them. 0 where it
 * might read them otherwise (another type, a sign, a key twice or with escapes): the args go to Python as text. */
static int memory_numbers(const char *start, const char *end, double *allocated, double *reserved, int64_t *device) {
    Cur c = {start + 1, end};
    *allocated = *reserved = NAN;
    *device = 0;
    unsigned seen = 0;
    for (int i = 0;; i++) {
        int more = i == 0 ? closes(&c, '}') : next_or_close(&c, '}');
        if (more != 1) {
            return more == 2;
        }
        Span k;
        int escaped;
        if (!member_key(&c, &k, &escaped) || escaped) {
            return 0;
        }
        unsigned bit = key_is(k, "Total Allocated") ? 1 : key_is(k, "Total Reserved") ? 2 : 0;
        bit = key_is(k, "Device Type") ? 4 : bit;
        if (seen & bit) {
            return 0;
        }
        seen |= bit;
        if (bit == 1 || bit == 2) {
            if (!memory_float(&c, bit == 1 ? allocated : reserved)) {
                return 0;
            }
        } else if (bit == 4) {
            Value v;
            if (*c.p == '-' || !number_or_null(&c, &v) || v.kind == FLOAT) {
                return 0;
            }
            *device = v.kind == INT ? v.i : 0;
        } else if (!skip_value(&c, 2)) {
            return 0;
        }
    }
}

static const char FULL_PHASES[] = "XMiICBEbenPNODRVvc()";
static const char FLOW_PHASES[] = "stf";
enum { PHASE_UNKNOWN = 0, PHASE_FULL = 1, PHASE_FLOW = 2 };
static unsigned char PHASE[256]; /* by a phase's one letter */

static void init_phases(void) {
    for (const char *ph = FULL_PHASES; *ph; ph++) {
        PHASE[(unsigned char)*ph] = PHASE_FULL;
    }
    for (const char *ph = FLOW_PHASES; *ph; ph++) {
        PHASE[(unsigned char)*ph] = PHASE_FLOW;
    }
}

static HOT int put_i64(Buf *b, int64_t v) { return buf_put(b, &v, sizeof v); }
static HOT int put_f64(Buf *b, double v) { return buf_put(b, &v, sizeof v); }

static int scan_event(Cur *c, Out *o) {
    /* only the kinds (a whole struct's zeroing per event was 8% of the scan): the other fields are read where the
     * kind says they were set */
    Value ph, cat, name, pid, tid, ts, dur;
    ph.kind = cat.kind = name.kind = pid.kind = tid.kind = ts.kind = dur.kind = ABSENT;
    Args args;
    args.stream.kind = args.corr.kind = args.ext.kind = args.name.kind = ABSENT;
    args.coll = 0;
    int has_args = 0; /* 0 absent/null, 1 an object */
    unsigned seen = 0;
    c->p++; /* the '{' */
    for (int i = 0;; i++) {
        int key = next_key(c, o->event_gaps, i, event_key);
        if (key < 0) {
            if (key == -1 || i == 0) {
                return 0; /* not valid, or no ph */
            }
            break;
        }
        char first = *c->p;
        unsigned bit = key == K_OTHER ? 0 : 1u << key;
        if (seen & bit) {
            return 0; /* a known key twice */
        }
        if (key == K_PH) {
            int esc;
            if (first != '"' || !scan_string(c, &ph.s, &esc) || esc || ph.s.len != 1) {
                return 0;
            }
            ph.kind = STR;
        } else if (key == K_CAT || key == K_NAME) {
            Value *v = key == K_CAT ? &cat : &name;
            if (first == '"') {
                int esc;
                if (!scan_string(c, &v->s, &esc) || esc) {
                    return 0;
                }
                v->kind = STR;
            } else if (first == 'n' && key == K_CAT) {
                if (!literal(c, "null", 4)) {
                    return 0;
                }
                v->kind = NUL;
            } else {
                return 0;
            }
        } else if (key == K_PID || key == K_TID) {
            Value *v = key == K_PID ? &pid : &tid;
            if (first == 'n' || first == '-' || is_digit(first)) {
                if (!number_or_null(c, v)) {
                    return 0;
                }
            } else {
                v->kind = OTHER; /* a label ("Traces"): outside the fast path only where it is used */
                if (!skip_value(c, 2)) {
                    return 0;
                }
            }
        } else if (key == K_TS || key == K_DUR) {
            if (!number_or_null(c, key == K_TS ? &ts : &dur)) {
                return 0;
            }
        } else if (key == K_ARGS) {
            if (first == '{') {
                if (!scan_args(c, &args, o->args_gaps)) {
                    return 0;
                }
                has_args = 1;
            } else if (first == 'n') {
                if (!literal(c, "null", 4)) {
                    return 0;
                }
            } else {
                return 0;
            }
        } else if (!skip_value(c, 1)) {
            return 0;
        }
        seen |= bit;
    }
    o->events++;
    if (ph.kind != STR) {
        return 0;
    }
    char phase = ph.s.ptr[0];
    unsigned char kind = PHASE[(unsigned char)phase];
    if (kind == PHASE_FLOW) {
        return 1; /* flow events carry nothing the analyses keep */
    }
    if (kind != PHASE_FULL) {
        return 0;
    }
    int64_t pid_v, tid_v;
    int is_row = (dur.kind == INT || dur.kind == FLOAT) && cat.kind == STR;
    if (!is_row) {
        Span memory = {"[memory]", 8};
        if (name.kind == STR && name.s.len == memory.len && memcmp(name.s.ptr, memory.ptr, memory.len) == 0) {
            /* the allocator's events (profile_memory): their args are decoded in Python, as collectives' are */
            if (has_args && (ts.kind == INT || ts.kind == FLOAT)) {
                double row[3];
                int64_t span[2] = {(int64_t)(args.start - o->base), (int64_t)(args.end - o->base)};
                row[0] = ts.kind == INT ? (double)ts.i : ts.f;
                memcpy(&row[1], span, sizeof span);
                if (!buf_put(&o->memory, row, sizeof row)) {
                    o->oom = 1;
                    return 0;
                }
                double nums[4];
                int64_t device;
                nums[0] = row[0];
                if (!o->memtext && memory_numbers(args.start, args.end, &nums[1], &nums[2], &device)) {
                    memcpy(&nums[3], &device, sizeof device);
                    if (!buf_put(&o->memnum, nums, sizeof nums)) {
                        o->oom = 1;
                        return 0;
                    }
                } else {
                    o->memtext = 1;
                }
            }
            return 1;
        }
        Span thread = {"thread_name", 11};
        if (phase == 'M' && has_args && name.kind == STR && name.s.len == thread.len &&
            memcmp(name.s.ptr, thread.ptr, thread.len) == 0) {
            if (args.name.kind == OTHER) {
                return 0; /* a thread name with escapes */
            }
            if (args.name.kind == STR) {
                if (!int_field(&pid, &pid_v) || !int_field(&tid, &tid_v)) {
                    return 0;
                }
                int64_t row[4] = {pid_v, tid_v, (int64_t)(args.name.s.ptr - o->base), (int64_t)args.name.s.len};
                if (!buf_put(&o->threads, row, sizeof row)) {
                    o->oom = 1;
                    return 0;
                }
            }
        }
        return 1;
    }
    if (cat.s.len == 5 && memcmp(cat.s.ptr, "Trace", 5) == 0) {
        return 1;
    }
    if (ts.kind != INT && ts.kind != FLOAT) {
        return 0; /* a complete event without ts: the Python path says so */
    }
    if (!int_field(&pid, &pid_v) || !int_field(&tid, &tid_v)) {
        return 0; /* pid or tid a string: the Python path labels it */
    }
    Span empty = {"", 0};
    int32_t name_id = table_id(&o->names, name.kind == STR ? name.s : empty);
    int32_t cat_id = table_id(&o->cats, cat.s);
    if (name_id < 0 || cat_id < 0) {
        o->oom = 1;
        return 0;
    }
    int64_t stream_v = -1, corr_v = -1, ext_v = -1;
    if (has_args && !(stream_field(&args.stream, &stream_v) && id_field(&args.corr, &corr_v) &&
                      id_field(&args.ext, &ext_v))) {
        return 0;
    }
    int ok = put_i64(&o->ts_i, ts.kind == INT ? ts.i : 0) && put_f64(&o->ts_f, ts.kind == INT ? (double)ts.i : ts.f) &&
             put_i64(&o->dur_i, dur.kind == INT ? dur.i : 0) &&
             put_f64(&o->dur_f, dur.kind == INT ? (double)dur.i : dur.f) && buf_put(&o->name, &name_id, 4) &&
             buf_put(&o->cat, &cat_id, 4) && put_i64(&o->pid, pid_v) && put_i64(&o->tid, tid_v) &&
             put_i64(&o->stream, stream_v) && put_i64(&o->corr, corr_v) && put_i64(&o->ext, ext_v);
    if (ok && has_args && args.coll) {
        int64_t row[3] = {o->rows, (int64_t)(args.start - o->base), (int64_t)(args.end - o->base)};
        ok = buf_put(&o->coll, row, sizeof row);
    }
    if (!ok) {
        o->oom = 1;
        return 0;
    }
    o->ts_float |= ts.kind == FLOAT;
    o->dur_float |= dur.kind == FLOAT;
    o->rows++;
    return 1;
}

static int scan_array(Cur *c, Out *o) {
    ws(c);
    if (c->p >= c->end || *c->p != '[') {
        return 0;
    }
    int more = open_container(c, ']');
    while (more == 1) {
        if (*c->p != '{' || !scan_event(c, o)) {
            return 0;
        }
        more = next_or_close(c, ']');
    }
    ws(c);
    return more == 2 && c->p == c->end;
}

/* An array's elements without its brackets: events separated by ',' (whitespace around them), to the end of the
 * text; what scan_array accepts between its '[' and ']', except that it holds at least one event. */
static int scan_items(Cur *c, Out *o) {
    for (;;) {
        ws(c);
        if (c->p >= c->end || *c->p != '{' || !scan_event(c, o)) {
            return 0;
        }
        ws(c);
        if (c->p == c->end) {
            return 1;
        }
        if (*c->p != ',') {
            return 0;
        }
        c->p++;
    }
}

static void out_free(Out *o) {
    Buf *bufs[] = {&o->ts_i, &o->ts_f, &o->dur_i, &o->dur_f, &o->name, &o->cat, &o->pid, &o->tid,
                   &o->stream, &o->corr, &o->ext, &o->coll, &o->threads, &o->memory, &o->memnum};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(bufs[i]->data);
    }
    table_free(&o->names);
    table_free(&o->cats);
}

static PyObject *bytes_of(const Buf *b) { return PyBytes_FromStringAndSize(b->len ? b->data : "", (Py_ssize_t)b->len); }

/* The interned spans as a list of str (strict UTF-8); NULL with a UnicodeDecodeError for the caller to clear. */
static PyObject *strings_of(const Table *t) {
    PyObject *list = PyList_New((Py_ssize_t)t->count);
    if (list == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < t->count; i++) {
        PyObject *s = PyUnicode_DecodeUTF8(t->spans[i].ptr, (Py_ssize_t)t->spans[i].len, "strict");
        if (s == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, s);
    }
    return list;
}

/* The [memory] events' args texts as one JSON array, "[a0,a1,...]" (b"" when there are none), decoded in Python in
 * one call; each text starts after the "[" or the "," before it. */
static PyObject *memory_args(const Buf *m, const char *base) {
    size_t n = m->len / (3 * sizeof(double)), total = 1;
    const double *row = (const double *)m->data;
    for (size_t i = 0; i < n; i++) {
        int64_t span[2];
        memcpy(span, &row[3 * i + 1], sizeof span);
        total += (size_t)(span[1] - span[0]) + 1;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, n ? (Py_ssize_t)total : 0);
    if (out == NULL || n == 0) {
        return out;
    }
    char *w = PyBytes_AS_STRING(out);
    for (size_t i = 0; i < n; i++) {
        int64_t span[2];
        memcpy(span, &row[3 * i + 1], sizeof span);
        *w++ = i ? ',' : '[';
        memcpy(w, base + span[0], (size_t)(span[1] - span[0]));
        w += span[1] - span[0];
    }
    *w = ']';
    return out;
}

/* The [memory] events' times (float64 bytes, in the order of memory_args). */
static PyObject *memory_times(const Buf *m) {
    size_t n = m->len / (3 * sizeof(double));
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * sizeof(double)));
    if (out == NULL) {
        return NULL;
    }
    double *w = (double *)PyBytes_AS_STRING(out);
    const double *row = (const double *)m->data;
    for (size_t i = 0; i < n; i++) {
        w[i] = row[3 * i];
    }
    return out;
}

static PyObject *build(const Out *o, const char *base) {
    PyObject *names = strings_of(&o->names);
    PyObject *cats = names ? strings_of(&o->cats) : NULL;
    PyObject *coll = cats ? PyList_New(0) : NULL;
    PyObject *threads = coll ? PyList_New(0) : NULL;
    static const Buf none = {0};
    const Buf *texts = o->memtext ? &o->memory : &none; /* all of the chunk's [memory] events one way: their order */
    PyObject *memory = threads ? memory_args(texts, base) : NULL;
    PyObject *memory_ts = memory ? memory_times(texts) : NULL;
    PyObject *memory_rows = memory_ts ? bytes_of(o->memtext ? &none : &o->memnum) : NULL;
    PyObject *result = NULL;
    if (memory_rows == NULL) {
        goto done;
    }
    const int64_t *c = (const int64_t *)o->coll.data;
    for (size_t i = 0; i < o->coll.len / (3 * sizeof(int64_t)); i++) {
        const char *start = base + c[3 * i + 1];
        const char *end = base + c[3 * i + 2];
        PyObject *item = Py_BuildValue("(Ly#)", (long long)c[3 * i], start, (Py_ssize_t)(end - start));
        if (item == NULL || PyList_Append(coll, item) < 0) {
            Py_XDECREF(item);
            goto done;
        }
        Py_DECREF(item);
    }
    const int64_t *t = (const int64_t *)o->threads.data;
    for (size_t i = 0; i < o->threads.len / (4 * sizeof(int64_t)); i++) {
        const char *start = base + t[4 * i + 2];
        PyObject *name = PyUnicode_DecodeUTF8(start, (Py_ssize_t)t[4 * i + 3], "strict");
        if (name == NULL) {
            goto done;
        }
        PyObject *item = Py_BuildValue("(LLN)", (long long)t[4 * i], (long long)t[4 * i + 1], name);
        if (item == NULL || PyList_Append(threads, item) < 0) {
            Py_XDECREF(item);
            goto done;
        }
        Py_DECREF(item);
    }
    result = Py_BuildValue(
        "{s:L,s:L,s:N,s:N,s:N,s:N,s:N,s:O,s:N,s:O,s:N,s:N,s:N,s:N,s:N,s:O,s:O,s:O,s:O,s:O}",
        "events", (long long)o->events, "rows", (long long)o->rows,
        "ts", bytes_of(o->ts_float ? &o->ts_f : &o->ts_i), "ts_float", PyBool_FromLong(o->ts_float),
        "dur", bytes_of(o->dur_float ? &o->dur_f : &o->dur_i), "dur_float", PyBool_FromLong(o->dur_float),
        "name_id", bytes_of(&o->name), "names", names, "cat_id", bytes_of(&o->cat), "cats", cats,
        "pid", bytes_of(&o->pid), "tid", bytes_of(&o->tid), "stream", bytes_of(&o->stream),
        "correlation", bytes_of(&o->corr), "external_id", bytes_of(&o->ext), "collectives", coll,
        "threads", threads, "memory_ts", memory_ts, "memory_args", memory, "memory_rows", memory_rows);
done:
    Py_XDECREF(names);
    Py_XDECREF(cats);
    Py_XDECREF(coll);
    Py_XDECREF(threads);
    Py_XDECREF(memory);
    Py_XDECREF(memory_ts);
    Py_XDECREF(memory_rows);
    return result;
}

/* The columns of the text [start, end) read as an array (`items` 0) or as an array's elements without its brackets
 * (`items` 1); None outside the fast path. */
static PyObject *scan_text(const char *start, const char *end, int items) {
    Out o;
    memset(&o, 0, sizeof o);
    o.base = start;
    Cur c = {start, end};
    int ok;
    Py_BEGIN_ALLOW_THREADS
    ok = items ? scan_items(&c, &o) : scan_array(&c, &o);
    Py_END_ALLOW_THREADS
    PyObject *result = NULL;
    if (o.oom) {
        PyErr_NoMemory();
    } else if (ok) {
        result = build(&o, start);
        if (result == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear(); /* names that are not UTF-8: the Python path replaces the bad bytes */
            result = Py_NewRef(Py_None);
        }
    } else {
        result = Py_NewRef(Py_None);
    }
    out_free(&o);
    return result;
}

static PyObject *scan(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    PyObject *result = scan_text((const char *)view.buf, (const char *)view.buf + view.len, 0);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *scan_items_of(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "y*nn:scan_items", &view, &start, &end)) {
        return NULL;
    }
    PyObject *result = NULL;
    if (start < 0 || end < start || end > view.len) {
        PyErr_SetString(PyExc_ValueError, "scan_items: start and end must satisfy 0 <= start <= end <= len(text)");
    } else {
        result = scan_text((const char *)view.buf + start, (const char *)view.buf + end, 1);
    }
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_O,
     "scan(chunk) -> dict | None: the columns of a JSON array of trace events, None outside the fast path."},
    {"scan_items", scan_items_of, METH_VARARGS,
     "scan_items(text, start, end) -> dict | None: the columns of the events in text[start:end], an array's "
     "elements without its brackets (as scan would read them between '[' and ']'), None outside the fast path."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__scan(void) {
    init_stop();
    init_phases();
    return PyModule_Create(&module);
}
