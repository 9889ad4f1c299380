/*
 * sites.c — the allocating line of each block a C scope or series left
 * behind, for the failure message of LEAK_SCOPE_END and LEAK_REPEAT.
 *
 * While a scope opened by the macros is open (a series: from its first
 * measured run on), an allocator hook records every block allocated and
 * forgets every block freed (sitetab.h).  The blocks still recorded when
 * it ends are the ones it left; each is named by the first frame of its
 * stack in the user's code, past the C library's helpers (strdup,
 * asprintf, ...), the sanitizer's and leakcheck's own frames, and the
 * sites are listed most bytes first.  Two recorders, found at run time so
 * that nothing is linked in and nothing is paid where neither is:
 *
 *   - AddressSanitizer: its malloc and free hooks
 *     (__sanitizer_install_malloc_and_free_hooks) fill a table here; the
 *     stack of a block is the sanitizer's own (__asan_get_alloc_stack),
 *     named by its symbolizer (__sanitizer_symbolize_pc);
 *   - the tracer, libleakcheck-trace.so, preloaded into a plain glibc
 *     process (c_api/trace/trace.c): its table, stacks and names.
 *
 * The tracer also keeps the stack of each call that opened a descriptor
 * while recording; a leaked descriptor's line in the report (fds.c) names
 * it by the same frame, through lc__sites_fd_opener.  AddressSanitizer
 * keeps nothing of descriptors: there, nothing more is said.
 *
 * Without either, the message says in one line how to get the lines; under
 * valgrind, that memcheck's loss records name them.  One scope or series
 * records at a time: one that opens inside another gets no lines.
 * Not thread-safe between scopes: the macros open and close them in one
 * thread, as Check runs its tests.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "sitetab.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LC__SITES_SHOWN 5       /* sites a message lists                   */
#define LC__SITES_KEPT 64       /* distinct sites told apart               */

enum { REC_UNKNOWN, REC_NONE, REC_ASAN, REC_TRACER };

typedef size_t (*asan_stack_fn)(void *, void **, size_t, int *);
typedef void (*symbolize_fn)(void *, const char *, char *, size_t);
typedef int (*ownership_fn)(const volatile void *);
typedef size_t (*size_fn)(const volatile void *);
typedef int (*hooks_fn)(void (*)(const volatile void *, size_t),
                        void (*)(const volatile void *));
typedef lc__site_table *(*table_fn)(void);
typedef lc__fd_slot *(*fds_fn)(void);
typedef int (*describe_fn)(const void *, char *, size_t);

static struct {
    int kind;                   /* REC_*                                   */
    lc__site_table *table;      /* the recorder's, NULL with REC_NONE      */
    const void *owner;          /* the scope or series recording, or whose
                                 * blocks the table holds                 */
    int stopped;                /* the owner's recording has ended         */
    asan_stack_fn asan_stack;   /* REC_ASAN                                */
    symbolize_fn symbolize;
    ownership_fn owned;
    size_fn allocated_size;
    describe_fn describe;       /* REC_TRACER                              */
    lc__fd_slot *fds;           /* REC_TRACER: descriptors' openers, or NULL
                                 * from a tracer that keeps none          */
} rec;

static lc__site_table asan_table;

static void
asan_malloc_hook(const volatile void *p, size_t size)
{
    lc__site_slot *s;

    if (p == NULL || atomic_load_explicit(&asan_table.state,
                                          memory_order_relaxed) !=
                         LC__SITES_ALL)
        return;
    s = lc__sitetab_claim(&asan_table, (uintptr_t)p);
    if (s != NULL) {
        s->size = size;
        s->pc[0] = NULL;        /* the sanitizer keeps the stack          */
        lc__sitetab_publish(s, (uintptr_t)p);
    }
}

static void
asan_free_hook(const volatile void *p)
{
    lc__sitetab_freed(&asan_table, p);
}

static int
find_asan(void)
{
    hooks_fn install = (hooks_fn)lc__lookup(
        "__sanitizer_install_malloc_and_free_hooks");

    rec.asan_stack = (asan_stack_fn)lc__lookup("__asan_get_alloc_stack");
    rec.symbolize = (symbolize_fn)lc__lookup("__sanitizer_symbolize_pc");
    rec.owned = (ownership_fn)lc__lookup("__sanitizer_get_ownership");
    rec.allocated_size = (size_fn)lc__lookup("__sanitizer_get_allocated_size");
    if (install == NULL || rec.asan_stack == NULL || rec.symbolize == NULL ||
        rec.owned == NULL || rec.allocated_size == NULL)
        return 0;
    if (lc__sitetab_map(&asan_table) != 0 ||
        install(asan_malloc_hook, asan_free_hook) == 0)
        return 0;
    rec.table = &asan_table;
    return 1;
}

static int
find_tracer(void)
{
    table_fn table = (table_fn)lc__lookup("lc_trace_table_v1");
    fds_fn fds = (fds_fn)lc__lookup("lc_trace_fds_v1");

    rec.describe = (describe_fn)lc__lookup("lc_trace_describe_v1");
    if (table == NULL || rec.describe == NULL)
        return 0;
    rec.table = table();
    rec.fds = fds != NULL ? fds() : NULL;
    return rec.table != NULL;
}

void
lc__sites_prepare(void)
{
    if (rec.kind != REC_UNKNOWN)
        return;
    if (find_asan())
        rec.kind = REC_ASAN;
    else if (find_tracer())
        rec.kind = REC_TRACER;
    else
        rec.kind = REC_NONE;
}

static int
can_record(void)
{
    return rec.table != NULL && rec.table->slots != NULL &&
           rec.table->unavailable == NULL;
}

void
lc__sites_start(const void *owner)
{
    lc__sites_prepare();
    if (!can_record() ||
        (rec.owner != NULL && rec.owner != owner && !rec.stopped))
        return;
    rec.owner = owner;
    rec.stopped = 0;
    lc__sitetab_reset(rec.table);
    lc__fdtab_reset(rec.fds);
    atomic_store(&rec.table->state, LC__SITES_ALL);
}

void
lc__sites_pause(const void *owner)
{
    if (can_record() && rec.owner == owner && !rec.stopped)
        atomic_store(&rec.table->state, LC__SITES_FREES);
}

void
lc__sites_resume(const void *owner)
{
    if (can_record() && rec.owner == owner && !rec.stopped)
        atomic_store(&rec.table->state, LC__SITES_ALL);
}

void
lc__sites_stop(const void *owner)
{
    if (can_record() && rec.owner == owner && !rec.stopped) {
        atomic_store(&rec.table->state, LC__SITES_OFF);
        rec.stopped = 1;
    }
}

void
lc__sites_release(const void *owner)
{
    if (rec.owner == owner && owner != NULL) {
        lc__sites_stop(owner);
        rec.owner = NULL;
    }
}

/* ---- the report --------------------------------------------------------- */

typedef struct site {
    void *pc;                   /* the return address in the user's code   */
    int64_t bytes, blocks;
    int line;                   /* 1: `name` holds file:line; 0: no debug
                                 * information; 2: the tracer reads no
                                 * lines (built without libdw)        */
    char name[160];             /* "file.c:LINE function()"                */
} site;

/* The objects whose frames are looked past besides the system's. */
typedef struct own_objects {
    const void *own_base;       /* leakcheck's own object                  */
    const void *tracer_base;
} own_objects;

typedef struct tally {
    site kept[LC__SITES_KEPT];
    int n;
    int64_t other_bytes, other_blocks;  /* sites beyond LC__SITES_KEPT    */
    int other_sites;
    int overflow;               /* sites beyond LC__SITES_KEPT were seen   */
    own_objects own;
} tally;

static int
has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Whether a frame at `pc` is one to look past: the C library's helpers,
 * the sanitizer's runtime, the C++ runtime, leakcheck and its tracer. */
static int
skipped(const own_objects *own, void *pc)
{
    Dl_info info;
    const char *name;

    if (dladdr((char *)pc - 1, &info) == 0 || info.dli_fname == NULL)
        return 0;
    if (info.dli_fbase == own->own_base || info.dli_fbase == own->tracer_base)
        return 1;
    name = strrchr(info.dli_fname, '/');
    name = name ? name + 1 : info.dli_fname;
    return has_prefix(name, "libc.so") || has_prefix(name, "libc-") ||
           has_prefix(name, "ld-linux") || has_prefix(name, "libdl.") ||
           has_prefix(name, "libpthread.") || has_prefix(name, "libasan") ||
           has_prefix(name, "libubsan") || has_prefix(name, "liblsan") ||
           has_prefix(name, "libstdc++");
}

static void
count(tally *t, void *pc, size_t size)
{
    int i;

    for (i = 0; i < t->n; i++)
        if (t->kept[i].pc == pc) {
            t->kept[i].bytes += (int64_t)size;
            t->kept[i].blocks++;
            return;
        }
    if (t->n < LC__SITES_KEPT) {
        t->kept[t->n].pc = pc;
        t->kept[t->n].bytes = (int64_t)size;
        t->kept[t->n].blocks = 1;
        t->n++;
        return;
    }
    t->other_bytes += (int64_t)size;
    t->other_blocks++;
    t->overflow = 1;
}

/* The frame that names a block: its first one past the skipped objects;
 * when every frame is skipped (the C library allocated for itself, or the
 * stack ends first), the caller of the allocation function, pc[caller]. */
static void *
site_of(const own_objects *own, void **pc, size_t n, size_t caller)
{
    size_t i;

    for (i = 0; i < n && pc[i] != NULL; i++)
        if (!skipped(own, pc[i]))
            return pc[i];
    return caller < n && pc[caller] != NULL ? pc[caller] : pc[0];
}

static void
tally_block(tally *t, const lc__site_slot *s, uintptr_t key)
{
    void *stack[64];
    size_t n;

    if (rec.kind == REC_ASAN) {
        int tid;
        /* The table froze at the end; a block freed since, or its address
         * given out again, is not what was left. */
        if (!rec.owned((const void *)key) ||
            rec.allocated_size((const void *)key) != s->size)
            return;
        n = rec.asan_stack((void *)key, stack, LC__ARRAY_LEN(stack), &tid);
        if (n == 0)
            return;
        /* stack[0] is the sanitizer's malloc */
        count(t, site_of(&t->own, stack, n, 1), s->size);
    } else {
        count(t, site_of(&t->own, (void **)s->pc, LC__SITE_FRAMES, 0),
              s->size);
    }
}

static int
by_bytes(const void *a, const void *b)
{
    const site *x = a, *y = b;

    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    return x->blocks < y->blocks ? 1 : x->blocks > y->blocks ? -1 : 0;
}

static void
find_own(own_objects *own)
{
    Dl_info info;

    memset(own, 0, sizeof *own);
    if (dladdr((void *)lc__sites_report, &info) != 0)
        own->own_base = info.dli_fbase;
    if (rec.kind == REC_TRACER && dladdr((void *)rec.describe, &info) != 0)
        own->tracer_base = info.dli_fbase;
}

/* Names a site: "file.c:LINE function()"; 1 when the line is known, 2
 * when the tracer reads no lines, else 0. */
static int
describe(void *pc, char *buf, size_t size)
{
    if (rec.kind == REC_TRACER) {
        int found = rec.describe(pc, buf, size);
        if (found < 0)
            snprintf(buf, size, "%p", pc);
        return found < 0 ? 0 : found;
    }
    buf[0] = '\0';
    rec.symbolize(pc, "%s:%l %f()", buf, size);
    if (buf[0] != '\0' && strncmp(buf, "<null>", 6) != 0 &&
        strstr(buf, ":0 ") == NULL) {
        const char *slash = strrchr(buf, '/');
        if (slash != NULL)
            memmove(buf, slash + 1, strlen(slash + 1) + 1);
        return 1;
    }
    rec.symbolize(pc, "%f() in %m", buf, size);
    {
        char *in = strstr(buf, "() in ");
        char *slash = in ? strrchr(in, '/') : NULL;
        if (slash != NULL)     /* the object's name, not its path */
            memmove(in + 6, slash + 1, strlen(slash + 1) + 1);
    }
    return 0;
}

/* Names every site, and merges those that read the same (two calls on
 * one line). */
static void
name_sites(tally *t)
{
    int i, j, n = 0;

    for (i = 0; i < t->n; i++)
        t->kept[i].line = describe(t->kept[i].pc, t->kept[i].name,
                                   sizeof t->kept[i].name);
    if (rec.kind == REC_TRACER)
        rec.describe(NULL, NULL, 0);
    for (i = 0; i < t->n; i++) {
        for (j = 0; j < n; j++)
            if (strcmp(t->kept[j].name, t->kept[i].name) == 0)
                break;
        if (j < n) {
            t->kept[j].bytes += t->kept[i].bytes;
            t->kept[j].blocks += t->kept[i].blocks;
        } else {
            t->kept[n++] = t->kept[i];
        }
    }
    t->n = n;
}

static const char *
plural(int64_t n)
{
    return n == 1 ? "" : "s";
}

/* Where the tracer sits: beside leakcheck's own library. */
static void
tracer_hint(lc__buf *b, const char *what)
{
    Dl_info info;
    char path[PATH_MAX], dir[PATH_MAX];
    const char *slash;

    if (dladdr((void *)lc__sites_report, &info) != 0 &&
        info.dli_fname != NULL &&
        realpath(info.dli_fname, path) != NULL &&
        (slash = strrchr(path, '/')) != NULL) {
        snprintf(dir, sizeof dir, "%.*s/libleakcheck-trace.so",
                 (int)(slash - path), path);
        if (access(dir, R_OK) == 0) {
            lc__buf_printf(b, "  %s: run again with LD_PRELOAD=%s\n",
                           what, dir);
            return;
        }
    }
    lc__buf_printf(b, "  %s: run again with "
                      "LD_PRELOAD=libleakcheck-trace.so (installed beside "
                      "libleakcheck; `pkg-config --variable=tracer "
                      "leakcheck` gives its path)\n", what);
}

void
lc__sites_report(const void *owner, unsigned leaking, lc__buf *b)
{
    tally t;
    size_t i;
    int shown, listed, lines = 0, no_reader = 0;
    int fds = (leaking & LC_PROBE_BIT(LC_PROBE_FDS)) != 0;

    if (!(leaking & (LC_PROBE_BIT(LC_PROBE_NATIVE_BYTES) |
                     LC_PROBE_BIT(LC_PROBE_VALGRIND)))) {
        /* Descriptors only: where nothing records, how to get the lines
         * that opened them. */
        if (fds) {
            lc__sites_prepare();
            if (rec.kind == REC_NONE && lc__memcheck() != 1 &&
                lc__lookup("__sanitizer_get_current_allocated_bytes") == NULL)
                tracer_hint(b, "opening lines");
        }
        return;
    }
    lc__sites_prepare();
    if (lc__memcheck() == 1) {
        lc__buf_printf(b, "  allocating lines: in memcheck's loss records, "
                          "printed to valgrind's output at this check's "
                          "end (blocks still reachable with "
                          "--show-leak-kinds=all)\n");
        return;
    }
    if (rec.kind == REC_NONE) {
        if (lc__lookup("__sanitizer_get_current_allocated_bytes") != NULL)
            lc__buf_printf(b, "  allocating lines: this sanitizer's "
                              "allocator keeps no stacks to read "
                              "(AddressSanitizer's does)\n");
        else
            tracer_hint(b, fds ? "allocating and opening lines"
                               : "allocating lines");
        return;
    }
    if (!can_record()) {
        lc__buf_printf(b, "  allocating lines: %s\n",
                       rec.table->unavailable ? rec.table->unavailable
                                              : "the recorder has no table");
        return;
    }
    if (rec.owner != owner || !rec.stopped) {
        lc__buf_printf(b, "  allocating lines: not recorded (another scope "
                          "or series was recording)\n");
        return;
    }
    memset(&t, 0, sizeof t);
    find_own(&t.own);
    for (i = 0; i < LC__SITE_SLOTS; i++) {
        const lc__site_slot *s = &rec.table->slots[i];
        uintptr_t key = atomic_load_explicit(
            (_Atomic uintptr_t *)&s->key, memory_order_acquire);
        if (key > LC__SITE_BUSY)
            tally_block(&t, s, key);
    }
    if (t.n == 0) {
        lc__buf_printf(b, "  allocating lines: every block allocated while "
                          "it measured was freed (the growth is the "
                          "allocator's own)\n");
        return;
    }
    name_sites(&t);
    qsort(t.kept, (size_t)t.n, sizeof t.kept[0], by_bytes);
    lc__buf_printf(b, "  still allocated, by the line that allocated "
                      "them (most bytes first):\n");
    for (shown = 0; shown < t.n && shown < LC__SITES_SHOWN; shown++) {
        lines += t.kept[shown].line == 1;
        no_reader |= t.kept[shown].line == 2;
        lc__buf_printf(b, "    %s: %lld byte%s in %lld block%s\n",
                       t.kept[shown].name,
                       (long long)t.kept[shown].bytes,
                       plural(t.kept[shown].bytes),
                       (long long)t.kept[shown].blocks,
                       plural(t.kept[shown].blocks));
    }
    listed = shown;
    for (; shown < t.n; shown++) {
        t.other_bytes += t.kept[shown].bytes;
        t.other_blocks += t.kept[shown].blocks;
        t.other_sites++;
    }
    if (t.other_blocks > 0)
        lc__buf_printf(b, "    and %d%s more site%s: %lld byte%s in %lld "
                          "block%s\n", t.other_sites,
                       t.overflow ? " or" : "", plural(t.other_sites),
                       (long long)t.other_bytes, plural(t.other_bytes),
                       (long long)t.other_blocks, plural(t.other_blocks));
    if (no_reader)
        lc__buf_printf(b, "    (no file:line: the tracer was built without "
                          "elfutils' libdw, which reads them)\n");
    else if (lines < listed)
        lc__buf_printf(b, "    (no file:line where the code has no debug "
                          "information: compile it with -g)\n");
    if (atomic_load(&rec.table->dropped) > 0)
        lc__buf_printf(b, "    (%lu more blocks were not recorded: the "
                          "table of blocks had no room for them)\n",
                       atomic_load(&rec.table->dropped));
}

/* ---- the descriptors' openers ----------------------------------------- */

int
lc__sites_fd_opener(long fd, char *buf, size_t size)
{
    const lc__fd_slot *s;
    void *pc[LC__SITE_FRAMES], *site;
    own_objects own;

    if (rec.kind != REC_TRACER || rec.fds == NULL || !can_record() ||
        rec.owner == NULL || !rec.stopped || fd < 0 ||
        fd >= (long)LC__FD_SLOTS)
        return 0;
    s = &rec.fds[fd];
    if (atomic_load_explicit((_Atomic uintptr_t *)&s->key,
                             memory_order_acquire) != LC__FD_OPEN)
        return 0;
    memcpy(pc, s->pc, sizeof pc);
    if (pc[0] == NULL)
        return 0;
    find_own(&own);
    site = site_of(&own, pc, LC__SITE_FRAMES, 0);
    if (describe(site, buf, size) == 0 && strchr(buf, ':') == NULL &&
        strstr(buf, "() in ") == NULL)
        return 0;               /* an address, which says nothing */
    return 1;
}

void
lc__sites_fds_named(void)
{
    if (rec.kind == REC_TRACER && rec.describe != NULL)
        rec.describe(NULL, NULL, 0);
}
