/*
 * pyhook.c — leakcheck's allocator hook on the three PyMem domains, behind
 * the py_bytes and py_allocs probes.
 *
 * As tracemalloc does: the previous allocator of each domain is saved and
 * every call is forwarded to it through `ctx`; installing twice is a no-op;
 * a thread-local flag keeps an allocation made *by* an allocator call (the
 * object allocator asks the raw one for large blocks) from being counted
 * twice.
 *
 * py_allocs is allocations minus frees.  A delta of that is exactly the
 * change in live allocations, whoever allocated the freed blocks, so no
 * size needs remembering: each thread adds to counters of its own (no
 * atomic instruction on the hot path) and a reading sums them.
 *
 * py_bytes needs the size of what is freed.  Blocks above pymalloc's small
 * request limit (512 bytes) and every raw-domain block go into one table,
 * pointer -> size, under a spin lock; small blocks are what `blocks` and
 * py_allocs already count, and keeping them out of the table keeps the
 * hook cheap.  A free first asks a counting filter, read without the lock,
 * whether the pointer can be in the table at all: almost every small free
 * stops there.  Blocks allocated before the hook was installed are not in
 * the table and their frees are ignored: py_bytes is "live large and raw
 * bytes allocated since install", which is what a delta needs; such a
 * block stays unknown when it is resized.  The table
 * lives in mmap'd memory so it never shows in the native_bytes probe.
 *
 * A block leaves the table before it is handed back to the allocator, so
 * an address re-used at once by another thread is never confused with it.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

/* Layout of CPython's PyMemAllocatorEx (unchanged from 3.5 to 3.13). */
typedef struct {
    void *ctx;
    void *(*malloc)(void *ctx, size_t size);
    void *(*calloc)(void *ctx, size_t nelem, size_t elsize);
    void *(*realloc)(void *ctx, void *ptr, size_t new_size);
    void (*free)(void *ctx, void *ptr);
} lc__allocator;

typedef void (*lc__get_alloc_fn)(int domain, lc__allocator *a);
typedef void (*lc__set_alloc_fn)(int domain, lc__allocator *a);

#define LC__DOMAINS 3          /* PYMEM_DOMAIN_RAW, _MEM, _OBJ            */
#define LC__DOMAIN_RAW 0
#define LC__SMALL 512          /* pymalloc's small request limit          */
#define LC__MIN_SLOTS 4096     /* first table: 64 KiB                     */
#define LC__FILTER_BITS 16

typedef struct {
    uintptr_t key;             /* block address; 0 marks an empty slot    */
    size_t size;               /* bytes requested                         */
} lc__slot;

/* The table of tracked blocks; every field under `lock`, except that
 * `filter` is also read without it. */
static struct {
    char lock;
    lc__slot *slots;           /* open addressing, linear probing         */
    size_t mask;               /* slot count - 1 (a power of two)         */
    size_t used;               /* live entries                            */
    int64_t bytes;             /* sum of their sizes                      */
    uint16_t filter[1u << LC__FILTER_BITS]; /* entries per filter hash    */
} table;

/* Per-thread allocation counters.  A thread's block is written only by its
 * thread; blocks are never freed: a thread that ends gives its block back
 * for the next new thread, counts included, so the sum stays right. */
typedef struct lc__counts {
    int64_t allocs;            /* allocations minus frees by this thread  */
    struct lc__counts *next;   /* all blocks, for readers; under reg_lock */
    int in_use;                /* 0: free for a new thread; under reg_lock */
} lc__counts;

static lc__counts *all_counts;
static char reg_lock;
static pthread_key_t counts_key;

static lc__allocator prev[LC__DOMAINS]; /* what we forward to; set once   */
static int installed;          /* written once, with the GIL held         */
static __thread int in_hook __attribute__((tls_model("initial-exec")));
static __thread lc__counts *my_counts __attribute__((tls_model("initial-exec")));

static inline void
spin_lock(char *l)
{
    int spins = 0;
    while (__atomic_test_and_set(l, __ATOMIC_ACQUIRE)) {
        if (++spins > 64) {
            sched_yield();
            spins = 0;
        }
    }
}

static inline void
spin_unlock(char *l)
{
    __atomic_clear(l, __ATOMIC_RELEASE);
}

static inline size_t
hash_of(uintptr_t key)
{
    /* Blocks are 16-byte aligned: drop those bits, then Fibonacci-hash. */
    return (size_t)(((key >> 4) * UINT64_C(0x9E3779B97F4A7C15)) >> 20);
}

static inline size_t
filter_of(uintptr_t key)
{
    return hash_of(key) >> (44 - LC__FILTER_BITS);
}

/* ---- per-thread counters ---- */

static void
release_counts(void *c)
{
    /* Allocations later in this thread's exit register afresh. */
    my_counts = NULL;
    spin_lock(&reg_lock);
    ((lc__counts *)c)->in_use = 0;
    spin_unlock(&reg_lock);
}

/* This thread's counters, made on its first allocation; NULL only when no
 * memory is left, and then the allocation is not counted. */
static lc__counts *
counts_slow(void)
{
    lc__counts *c;

    spin_lock(&reg_lock);
    for (c = all_counts; c != NULL; c = c->next)
        if (!c->in_use)
            break;
    if (c == NULL) {
        void *m = mmap(NULL, sizeof *c, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m != MAP_FAILED) {
            c = m;
            c->next = all_counts;
            all_counts = c;
        }
    }
    if (c != NULL)
        c->in_use = 1;
    spin_unlock(&reg_lock);
    if (c != NULL) {
        pthread_setspecific(counts_key, c);
        my_counts = c;
    }
    return c;
}

static inline void
count(int64_t n)
{
    lc__counts *c = my_counts;
    if (c == NULL && (c = counts_slow()) == NULL)
        return;
    c->allocs += n;
}

/* ---- the table ---- */

static lc__slot *
slots_alloc(size_t n)
{
    void *p = mmap(NULL, n * sizeof(lc__slot), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;   /* zero-filled: all empty */
}

/* Doubles the table; lock held.  0, or -1 when no memory (table kept). */
static int
grow_unlocked(void)
{
    size_t n = table.slots ? (table.mask + 1) * 2 : LC__MIN_SLOTS, i;
    lc__slot *s = slots_alloc(n);

    if (s == NULL)
        return -1;
    if (table.slots) {
        for (i = 0; i <= table.mask; i++) {
            uintptr_t k = table.slots[i].key;
            if (k) {
                size_t j = hash_of(k) & (n - 1);
                while (s[j].key)
                    j = (j + 1) & (n - 1);
                s[j] = table.slots[i];
            }
        }
        munmap(table.slots, (table.mask + 1) * sizeof(lc__slot));
    }
    table.slots = s;
    table.mask = n - 1;
    return 0;
}

static void
track(void *ptr, size_t size)
{
    uintptr_t key = (uintptr_t)ptr;
    size_t i;

    spin_lock(&table.lock);
    if (table.slots == NULL || (table.used + 1) * 2 > table.mask + 1) {
        if (grow_unlocked() != 0) {     /* no memory: the block goes   */
            spin_unlock(&table.lock);   /* unknown, as if born before  */
            return;
        }
    }
    i = hash_of(key) & table.mask;
    while (table.slots[i].key)         /* a live block is never present */
        i = (i + 1) & table.mask;
    table.slots[i].key = key;
    table.slots[i].size = size;
    table.used++;
    table.bytes += (int64_t)size;
    __atomic_store_n(&table.filter[filter_of(key)],
                     (uint16_t)(table.filter[filter_of(key)] + 1),
                     __ATOMIC_RELAXED);
    spin_unlock(&table.lock);
}

/* Removes ptr; returns its size, or (size_t)-1 when it is not tracked.
 * A thread frees only blocks it owns, and a block enters the table before
 * its owner gets it: a zero in the filter proves it is not there. */
static size_t
untrack(void *ptr)
{
    uintptr_t key = (uintptr_t)ptr;
    size_t i, j, size;

    if (__atomic_load_n(&table.filter[filter_of(key)], __ATOMIC_RELAXED) == 0)
        return (size_t)-1;
    spin_lock(&table.lock);
    i = hash_of(key) & table.mask;
    while (table.slots[i].key != key) {
        if (table.slots[i].key == 0) {
            spin_unlock(&table.lock);
            return (size_t)-1;
        }
        i = (i + 1) & table.mask;
    }
    size = table.slots[i].size;
    table.used--;
    table.bytes -= (int64_t)size;
    __atomic_store_n(&table.filter[filter_of(key)],
                     (uint16_t)(table.filter[filter_of(key)] - 1),
                     __ATOMIC_RELAXED);
    /* Backward-shift deletion keeps every probe sequence unbroken. */
    for (j = (i + 1) & table.mask; table.slots[j].key;
         j = (j + 1) & table.mask) {
        size_t home = hash_of(table.slots[j].key) & table.mask;
        if (((j - home) & table.mask) >= ((j - i) & table.mask)) {
            table.slots[i] = table.slots[j];
            i = j;
        }
    }
    table.slots[i].key = 0;
    spin_unlock(&table.lock);
    return size;
}

/* ---- the hook: ctx is the domain number ---- */

#define DOMAIN(ctx) ((int)(intptr_t)(ctx))
#define TRACKED(d, size) ((d) == LC__DOMAIN_RAW || (size) > LC__SMALL)

static void *
hook_malloc(void *ctx, size_t size)
{
    const lc__allocator *a = &prev[DOMAIN(ctx)];
    void *p;

    if (in_hook)
        return a->malloc(a->ctx, size);
    in_hook = 1;
    p = a->malloc(a->ctx, size);
    if (p != NULL) {
        count(1);
        if (TRACKED(DOMAIN(ctx), size))
            track(p, size);
    }
    in_hook = 0;
    return p;
}

static void *
hook_calloc(void *ctx, size_t nelem, size_t elsize)
{
    const lc__allocator *a = &prev[DOMAIN(ctx)];
    void *p;

    if (in_hook)
        return a->calloc(a->ctx, nelem, elsize);
    in_hook = 1;
    p = a->calloc(a->ctx, nelem, elsize);
    if (p != NULL) {
        count(1);
        if (TRACKED(DOMAIN(ctx), nelem * elsize)) /* p != NULL: no overflow */
            track(p, nelem * elsize);
    }
    in_hook = 0;
    return p;
}

static void *
hook_realloc(void *ctx, void *ptr, size_t new_size)
{
    const lc__allocator *a = &prev[DOMAIN(ctx)];
    size_t old = (size_t)-1;
    void *p;

    if (in_hook)
        return a->realloc(a->ctx, ptr, new_size);
    in_hook = 1;
    if (ptr != NULL)
        old = untrack(ptr);
    p = a->realloc(a->ctx, ptr, new_size);
    if (p != NULL) {
        if (ptr == NULL)
            count(1);
        /* A block born before the hook stays unknown when it moves: its
         * old size is not known, so counting its new size would read a
         * resize as growth (and its free is ignored anyway). */
        if ((ptr == NULL || old != (size_t)-1) &&
            TRACKED(DOMAIN(ctx), new_size))
            track(p, new_size);
    } else if (old != (size_t)-1) {
        track(ptr, old);               /* failed: ptr is still live */
    }
    in_hook = 0;
    return p;
}

static void
hook_free(void *ctx, void *ptr)
{
    const lc__allocator *a = &prev[DOMAIN(ctx)];

    if (in_hook || ptr == NULL) {
        a->free(a->ctx, ptr);
        return;
    }
    in_hook = 1;
    count(-1);
    untrack(ptr);
    a->free(a->ctx, ptr);
    in_hook = 0;
}

int
lc__pyhook_install(void *get_allocator, void *set_allocator)
{
    lc__get_alloc_fn get = (lc__get_alloc_fn)get_allocator;
    lc__set_alloc_fn set = (lc__set_alloc_fn)set_allocator;
    int d;

    if (installed)
        return LC_OK;
    if (get == NULL || set == NULL)
        return LC_EUNAVAIL;
    if (pthread_key_create(&counts_key, release_counts) != 0)
        return LC_ESYS;
    for (d = 0; d < LC__DOMAINS; d++) {
        lc__allocator mine;
        get(d, &prev[d]);
        mine.ctx = (void *)(intptr_t)d;
        mine.malloc = hook_malloc;
        mine.calloc = hook_calloc;
        mine.realloc = hook_realloc;
        mine.free = hook_free;
        set(d, &mine);
    }
    installed = 1;
    return LC_OK;
}

void
lc__pyhook_read(int64_t *bytes, int64_t *allocs)
{
    const lc__counts *c;
    int64_t n = 0;

    spin_lock(&reg_lock);
    for (c = all_counts; c != NULL; c = c->next)
        n += __atomic_load_n(&c->allocs, __ATOMIC_RELAXED);
    spin_unlock(&reg_lock);
    spin_lock(&table.lock);
    *bytes = table.bytes;
    spin_unlock(&table.lock);
    *allocs = n;
}
