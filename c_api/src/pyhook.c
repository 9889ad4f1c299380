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
 * py_bytes needs the size of what is freed, including blocks allocated
 * before the hook was installed (or inside another allocator call): a
 * delta is exact only when a free subtracts what the allocation added.
 * How the size is found depends on the allocators CPython runs with, as
 * CPython itself names them (_PyMem_GetCurrentAllocatorName, read once at
 * install, before the hook changes them):
 *
 * - "pymalloc" (the default) and "malloc": every raw-domain block is a
 *   malloc chunk, and so is every block pymalloc hands on to the raw
 *   domain (requests over 512 bytes, or of 0 bytes); under "malloc" every
 *   block of every domain is one.  A chunk counts its *usable* size,
 *   malloc_usable_size(), read at allocation and again at free or resize:
 *   the size of a block born before the hook is known when it dies.
 *   pymalloc's own small blocks count 0 bytes: `blocks` and py_allocs
 *   count them; so do, under "malloc", mem and object chunks of at most
 *   512 usable bytes.  Whether an object-domain block is a chunk is seen, not
 *   guessed: pymalloc frees or allocates it through PyMem_Raw*, and the
 *   raw hook, called inside the object-domain call, notes that the pointer
 *   it handles is the one the outer call is about (`nest`).  pymalloc's
 *   own bookkeeping (its arena vector, its radix tree) goes through the
 *   raw domain too and counts nothing, as before.  No table: a per-thread
 *   counter, like py_allocs.
 * - "pymalloc_debug" and "malloc_debug" (PYTHONMALLOC=debug, debug builds
 *   of CPython): every block carries CPython's debug header, which holds
 *   the size requested, big-endian, 2 * sizeof(size_t) bytes before the
 *   pointer.  A raw block, and a block of another domain over 512 bytes,
 *   counts its requested size, read from the header at free or resize.
 * - anything else (tracemalloc or another hook installed first, mimalloc):
 *   nothing tells a block's size.  Blocks above pymalloc's small request
 *   limit (512 bytes) and every raw-domain block go into one table,
 *   pointer -> requested size, under a spin lock; a free first asks a
 *   counting filter, read without the lock, whether the pointer can be in
 *   the table at all.  Blocks the table never saw are ignored when freed
 *   and stay unknown when resized, so there py_bytes can read a block
 *   freed and replaced as growth.  The table lives in mmap'd memory so it
 *   never shows in the native_bytes probe.  A block leaves the table before
 *   it is handed back to the allocator, so an address re-used at once by
 *   another thread is never confused with it.
 *
 * The hook can be taken out from under us: tracemalloc installed before it
 * (PYTHONTRACEMALLOC=1) restores, on stop(), the allocators it found, ours
 * not among them.  Every snapshot asks whether an allocation in each domain
 * still reaches the hook (on_path: the top allocator is ours, or one byte
 * allocated through it moves our count) and puts it back where it does
 * not.  The counters missed what happened meanwhile, so that snapshot
 * reads neither probe: no delta spans the gap, none reads a flat zero.
 * A hook installed after ours (a test's tracemalloc.start()) gets a gate
 * over it at the next snapshot, so that its own bookkeeping is not
 * counted (see `gate`).
 *
 * Under "pymalloc" and "pymalloc_debug" a third counter, `pymalloc`, is
 * allocations minus frees in the mem and object domains alone: what sys.getallocatedblocks()
 * counts (pymalloc's small blocks in its pools, and the blocks it handed
 * on to PyMem_RawMalloc, which it counts apart: `raw_allocated_blocks`;
 * resizing a block from one kind to the other moves neither count).  The
 * blocks probe is read from it without walking the pools (python.c).
 *
 * So py_bytes is "usable bytes of live large and raw blocks" under the
 * release allocators, "requested bytes" under the debug hooks; its value
 * is relative to the install (it can be negative), its deltas are exact.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <dlfcn.h>
#include <malloc.h>
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
    int64_t bytes;             /* bytes added minus removed (no table)    */
    int64_t pymalloc;          /* the same, of pymalloc's domains alone   */
    struct lc__counts *next;   /* all blocks, for readers; under reg_lock */
    int in_use;                /* 0: free for a new thread; under reg_lock */
} lc__counts;

static lc__counts *all_counts;
static char reg_lock;
static pthread_key_t counts_key;

/* One installation of the hook in one domain: what it forwards to.  The
 * hook's ctx points here.  Someone else can take the hook out (tracemalloc,
 * started before leakcheck, restores on stop() the allocators it found);
 * putting it back, or putting a gate over a hook installed after ours,
 * makes a new generation, so that a call still running in an old one
 * keeps the links it started with: generations are never freed. */
typedef struct {
    lc__allocator prev;        /* the allocator below ours                */
    int domain;
} lc__link;

typedef lc__link lc__generation[LC__DOMAINS];

#define LC__POOL_BYTES 4096    /* generations are mmap'd this many at once */

static lc__generation *pool;   /* the next free generation, or NULL       */
static size_t pool_left;       /* free generations from `pool` on         */
static int installed;          /* generations used; written with the GIL  */
static int restored;           /* domains put back, all generations       */
static int pymalloc_counted;   /* 1: `pymalloc` counts what pymalloc has  */
static int debug_on_pymalloc;  /* 1: CPython's debug hooks over pymalloc  */

/* The hook's per-thread state, in one thread-local struct: in a shared
 * object each thread-local variable's offset is a load of its own from
 * the GOT, and the hook reads three or four of them in every allocator
 * call.  One struct is one load.  The names below are its fields (`gate`
 * and `nest` are described where they are used). */
typedef struct {
    int in_hook;            /* 1 inside one of our allocator calls      */
    int gate;
    lc__counts *my_counts;  /* this thread's counters, or NULL          */
    struct {
        void *watch;
        void *out;
        size_t freed;
        int resizing;
    } nest;
} lc__hook_thread;

static __thread lc__hook_thread hook_thread
    __attribute__((tls_model("initial-exec")));

#define in_hook (hook_thread.in_hook)
#define my_counts (hook_thread.my_counts)
#define gate (hook_thread.gate)
#define nest (hook_thread.nest)

/* A hook installed after ours (tracemalloc started after leakcheck, a
 * test's tracemalloc.start() that it never stops) forwards each call to
 * ours, and between its calls allocates for its own bookkeeping through
 * the raw domain (tracemalloc: a trace per block, an interned traceback
 * per new call site), which the probes would read as the code's growth
 * in every later run.  So a gate goes on top of such a hook: a call that
 * enters through the gate of domain d counts only when, and as, it
 * reaches our hook of domain d the first time (what the hook forwarded);
 * whatever else reaches ours before the gate returns is the bookkeeping
 * of the hooks in between, and counts nothing.  A hook between that
 * frees instead what it could not record (tracemalloc, out of memory)
 * leaves one allocation counted that never lived.  What such a hook
 * allocates outside any allocator call (tracemalloc.start(), take_snapshot,
 * a traceback interned when an object is made) is still counted: that
 * is the doing of the code that calls it.
 *
 * `gate` is 0 outside a gate; domain + 1 inside one until our hook of
 * that domain takes the call; GATE_SPENT after. */
#define GATE_SPENT (-1)

/* 1 when a call reaching our hook of domain d (not nested in another of
 * our calls) is the code's, to be counted. */
static inline int
claim(int d)
{
    if (gate == 0)
        return 1;
    if (gate == d + 1) {
        gate = GATE_SPENT;
        return 1;
    }
    return 0;
}

/* What the raw hook saw inside an object-domain (or mem-domain) call of
 * pymalloc: whether the block that call frees or resizes (`watch`) was a
 * malloc chunk, and its usable size then (`freed`); the last block a
 * nested raw call handed out (`out`).  `resizing`: that call is a free
 * or a realloc.
 *
 * pymalloc's free and realloc free no raw block but the one they are
 * about (`watch`).  Another raw free nested in them comes from a hook
 * installed after ours and not gated (tracemalloc started since the last
 * snapshot: its raw hook drops the block's trace record there, in a
 * nested free and in a nested realloc that moves the block), and that
 * record was counted when tracemalloc allocated it, outside any call of
 * ours: so such a free counts too, or a test that starts and stops
 * tracemalloc reads a block per traced free or move as growth.  Under a
 * gate the record was not counted, nor is its free.  (`nest`: a field of
 * hook_thread, above.) */

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

/* `n` allocations and `bytes` more, of which `pymalloc` allocations in
 * pymalloc's domains. */
static inline void
count_in(int64_t n, int64_t bytes, int64_t pymalloc)
{
    lc__counts *c = my_counts;
    if (c == NULL && (c = counts_slow()) == NULL)
        return;
    c->allocs += n;
    c->bytes += bytes;
    c->pymalloc += pymalloc;
}

static inline void
count_bytes(int64_t n, int64_t bytes)
{
    count_in(n, bytes, 0);
}

/* A call of pymalloc's domains: `n` allocations and `bytes` more. */
static inline void
count_forward(int64_t n, int64_t bytes)
{
    count_in(n, bytes, n);
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

/* ---- the hooks: ctx is the domain number ---- */

/* -- no size known: the table -- */

#define LINK(ctx) ((const lc__link *)(ctx))
#define DOMAIN(ctx) (LINK(ctx)->domain)
#define TRACKED(d, size) ((d) == LC__DOMAIN_RAW || (size) > LC__SMALL)

static void *
table_malloc(void *ctx, size_t size)
{
    const lc__allocator *a = &LINK(ctx)->prev;
    void *p;

    if (in_hook || !claim(DOMAIN(ctx)))
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
table_calloc(void *ctx, size_t nelem, size_t elsize)
{
    const lc__allocator *a = &LINK(ctx)->prev;
    void *p;

    if (in_hook || !claim(DOMAIN(ctx)))
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
table_realloc(void *ctx, void *ptr, size_t new_size)
{
    const lc__allocator *a = &LINK(ctx)->prev;
    size_t old = (size_t)-1;
    void *p;

    if (in_hook || !claim(DOMAIN(ctx)))
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
table_free(void *ctx, void *ptr)
{
    const lc__allocator *a = &LINK(ctx)->prev;

    if (in_hook || ptr == NULL || !claim(DOMAIN(ctx))) {
        a->free(a->ctx, ptr);
        return;
    }
    in_hook = 1;
    count(-1);
    untrack(ptr);
    a->free(a->ctx, ptr);
    in_hook = 0;
}

/* -- malloc chunks: their usable size -- */

static inline int64_t
usable(void *p)
{
    return (int64_t)malloc_usable_size(p);
}

/* What a chunk of domain d counts: under "malloc" the mem and object
 * domains' small blocks are chunks too, and count nothing, as pymalloc's
 * do (usable sizes do not change while a block lives: the rule holds). */
static inline int64_t
chunk_bytes(int d, void *p)
{
    int64_t n = usable(p);
    return d == LC__DOMAIN_RAW || n > LC__SMALL ? n : 0;
}

/* A domain whose blocks are all malloc chunks: the raw domain, and every
 * domain under "malloc".  Called inside another allocator call (in_hook),
 * it only notes what it handled, for the outer call (see `nest`). */
static void *
direct_malloc(void *ctx, size_t size)
{
    const lc__allocator *a = &LINK(ctx)->prev;
    void *p;

    if (in_hook) {
        p = a->malloc(a->ctx, size);
        nest.out = p;
        return p;
    }
    if (!claim(DOMAIN(ctx)))
        return a->malloc(a->ctx, size);
    in_hook = 1;
    p = a->malloc(a->ctx, size);
    if (p != NULL)
        count_bytes(1, chunk_bytes(DOMAIN(ctx), p));
    in_hook = 0;
    return p;
}

static void *
direct_calloc(void *ctx, size_t nelem, size_t elsize)
{
    const lc__allocator *a = &LINK(ctx)->prev;
    void *p;

    if (in_hook) {
        p = a->calloc(a->ctx, nelem, elsize);
        nest.out = p;
        return p;
    }
    if (!claim(DOMAIN(ctx)))
        return a->calloc(a->ctx, nelem, elsize);
    in_hook = 1;
    p = a->calloc(a->ctx, nelem, elsize);
    if (p != NULL)
        count_bytes(1, chunk_bytes(DOMAIN(ctx), p));
    in_hook = 0;
    return p;
}

static void *
direct_realloc(void *ctx, void *ptr, size_t new_size)
{
    const lc__allocator *a = &LINK(ctx)->prev;
    void *p;
    int64_t old;

    if (in_hook) {
        old = ptr != NULL && ptr == nest.watch ? usable(ptr) : 0;
        p = a->realloc(a->ctx, ptr, new_size);
        if (p != NULL) {
            if (ptr != NULL && ptr == nest.watch)
                nest.freed = (size_t)old;
            nest.out = p;
        }
        return p;
    }
    if (!claim(DOMAIN(ctx)))
        return a->realloc(a->ctx, ptr, new_size);
    in_hook = 1;
    old = ptr != NULL ? chunk_bytes(DOMAIN(ctx), ptr) : 0; /* before it goes */
    p = a->realloc(a->ctx, ptr, new_size);
    if (p != NULL)          /* on failure ptr is still live, unchanged */
        count_bytes(ptr == NULL, chunk_bytes(DOMAIN(ctx), p) - old);
    in_hook = 0;
    return p;
}

static void
direct_free(void *ctx, void *ptr)
{
    const lc__allocator *a = &LINK(ctx)->prev;

    if (ptr == NULL) {
        a->free(a->ctx, ptr);
        return;
    }
    if (in_hook) {
        if (ptr == nest.watch)
            nest.freed = (size_t)usable(ptr);
        else if (nest.resizing && gate == 0)    /* see `nest` */
            count_bytes(-1, -chunk_bytes(DOMAIN(ctx), ptr));
        a->free(a->ctx, ptr);
        return;
    }
    if (!claim(DOMAIN(ctx))) {
        a->free(a->ctx, ptr);
        return;
    }
    in_hook = 1;
    count_bytes(-1, -chunk_bytes(DOMAIN(ctx), ptr));
    a->free(a->ctx, ptr);
    in_hook = 0;
}

/* pymalloc's domains ("pymalloc": mem and obj).  A block is a malloc chunk
 * when pymalloc passes it through PyMem_Raw*: the raw hook, nested, says
 * so.  pymalloc itself never frees or resizes a block it does not own
 * through anything but PyMem_RawFree / PyMem_RawRealloc of that very
 * pointer, and hands a large block out straight from PyMem_RawMalloc. */
static void *
forward_malloc(void *ctx, size_t size)
{
    const lc__allocator *a = &LINK(ctx)->prev;
    void *p;

    if (in_hook || !claim(DOMAIN(ctx)))
        return a->malloc(a->ctx, size);
    in_hook = 1;
    nest.out = NULL;
    p = a->malloc(a->ctx, size);
    if (p != NULL)
        count_forward(1, p == nest.out ? usable(p) : 0);
    in_hook = 0;
    return p;
}

static void *
forward_calloc(void *ctx, size_t nelem, size_t elsize)
{
    const lc__allocator *a = &LINK(ctx)->prev;
    void *p;

    if (in_hook || !claim(DOMAIN(ctx)))
        return a->calloc(a->ctx, nelem, elsize);
    in_hook = 1;
    nest.out = NULL;
    p = a->calloc(a->ctx, nelem, elsize);
    if (p != NULL)
        count_forward(1, p == nest.out ? usable(p) : 0);
    in_hook = 0;
    return p;
}

static void *
forward_realloc(void *ctx, void *ptr, size_t new_size)
{
    const lc__allocator *a = &LINK(ctx)->prev;
    void *p;

    if (in_hook || !claim(DOMAIN(ctx)))
        return a->realloc(a->ctx, ptr, new_size);
    in_hook = 1;
    nest.watch = ptr;
    nest.freed = 0;
    nest.out = NULL;
    nest.resizing = 1;
    p = a->realloc(a->ctx, ptr, new_size);
    nest.resizing = 0;
    if (p != NULL)
        count_forward(ptr == NULL, (p == nest.out ? usable(p) : 0) -
                                       (int64_t)nest.freed);
    in_hook = 0;
    return p;
}

static void
forward_free(void *ctx, void *ptr)
{
    const lc__allocator *a = &LINK(ctx)->prev;

    if (in_hook || ptr == NULL || !claim(DOMAIN(ctx))) {
        a->free(a->ctx, ptr);
        return;
    }
    in_hook = 1;
    nest.watch = ptr;
    nest.freed = 0;
    nest.resizing = 1;
    a->free(a->ctx, ptr);
    nest.resizing = 0;
    count_forward(-1, -(int64_t)nest.freed);
    in_hook = 0;
}

/* -- CPython's debug hooks: the requested size, from the block's header -- */

static inline int64_t
debug_bytes(int d, const void *ptr)
{
    const unsigned char *q = (const unsigned char *)ptr - 2 * sizeof(size_t);
    size_t n = 0, i;

    for (i = 0; i < sizeof(size_t); i++)     /* big-endian */
        n = (n << 8) | q[i];
    return TRACKED(d, n) ? (int64_t)n : 0;
}

#define DEBUG_BYTES(d, n) (TRACKED(d, n) ? (int64_t)(n) : 0)

/* Under "pymalloc_debug" each call of the mem and object domains is one
 * call of pymalloc below the debug hooks: counted as forward_* count. */
static inline void
count_debug(const void *ctx, int64_t n, int64_t bytes)
{
    count_in(n, bytes, DOMAIN(ctx) != LC__DOMAIN_RAW ? n : 0);
}

static void *
debug_malloc(void *ctx, size_t size)
{
    const lc__allocator *a = &LINK(ctx)->prev;
    void *p;

    if (in_hook || !claim(DOMAIN(ctx)))
        return a->malloc(a->ctx, size);
    in_hook = 1;
    p = a->malloc(a->ctx, size);
    if (p != NULL)
        count_debug(ctx, 1, DEBUG_BYTES(DOMAIN(ctx), size));
    in_hook = 0;
    return p;
}

static void *
debug_calloc(void *ctx, size_t nelem, size_t elsize)
{
    const lc__allocator *a = &LINK(ctx)->prev;
    void *p;

    if (in_hook || !claim(DOMAIN(ctx)))
        return a->calloc(a->ctx, nelem, elsize);
    in_hook = 1;
    p = a->calloc(a->ctx, nelem, elsize);
    if (p != NULL)                  /* p != NULL: no overflow */
        count_debug(ctx, 1, DEBUG_BYTES(DOMAIN(ctx), nelem * elsize));
    in_hook = 0;
    return p;
}

static void *
debug_realloc(void *ctx, void *ptr, size_t new_size)
{
    const lc__allocator *a = &LINK(ctx)->prev;
    int64_t old;
    void *p;

    if (in_hook || !claim(DOMAIN(ctx)))
        return a->realloc(a->ctx, ptr, new_size);
    in_hook = 1;
    old = ptr != NULL ? debug_bytes(DOMAIN(ctx), ptr) : 0;
    p = a->realloc(a->ctx, ptr, new_size);
    if (p != NULL)
        count_debug(ctx, ptr == NULL,
                    DEBUG_BYTES(DOMAIN(ctx), new_size) - old);
    in_hook = 0;
    return p;
}

static void
debug_free(void *ctx, void *ptr)
{
    const lc__allocator *a = &LINK(ctx)->prev;

    if (in_hook || ptr == NULL || !claim(DOMAIN(ctx))) {
        a->free(a->ctx, ptr);
        return;
    }
    in_hook = 1;
    count_debug(ctx, -1, -debug_bytes(DOMAIN(ctx), ptr));
    a->free(a->ctx, ptr);
    in_hook = 0;
}

/* -- the gate over a hook installed after ours: counts nothing itself -- */

static void *
gate_malloc(void *ctx, size_t size)
{
    const lc__allocator *a = &LINK(ctx)->prev;
    void *p;

    if (in_hook || gate)
        return a->malloc(a->ctx, size);
    gate = DOMAIN(ctx) + 1;
    p = a->malloc(a->ctx, size);
    gate = 0;
    return p;
}

static void *
gate_calloc(void *ctx, size_t nelem, size_t elsize)
{
    const lc__allocator *a = &LINK(ctx)->prev;
    void *p;

    if (in_hook || gate)
        return a->calloc(a->ctx, nelem, elsize);
    gate = DOMAIN(ctx) + 1;
    p = a->calloc(a->ctx, nelem, elsize);
    gate = 0;
    return p;
}

static void *
gate_realloc(void *ctx, void *ptr, size_t new_size)
{
    const lc__allocator *a = &LINK(ctx)->prev;
    void *p;

    if (in_hook || gate)
        return a->realloc(a->ctx, ptr, new_size);
    gate = DOMAIN(ctx) + 1;
    p = a->realloc(a->ctx, ptr, new_size);
    gate = 0;
    return p;
}

static void
gate_free(void *ctx, void *ptr)
{
    const lc__allocator *a = &LINK(ctx)->prev;

    if (in_hook || gate || ptr == NULL) {
        a->free(a->ctx, ptr);
        return;
    }
    gate = DOMAIN(ctx) + 1;
    a->free(a->ctx, ptr);
    gate = 0;
}

/* ---- install, read ---- */

static const lc__allocator table_hooks = {
    NULL, table_malloc, table_calloc, table_realloc, table_free};
static const lc__allocator direct_hooks = {
    NULL, direct_malloc, direct_calloc, direct_realloc, direct_free};
static const lc__allocator forward_hooks = {
    NULL, forward_malloc, forward_calloc, forward_realloc, forward_free};
static const lc__allocator debug_hooks = {
    NULL, debug_malloc, debug_calloc, debug_realloc, debug_free};
static const lc__allocator gate_hooks = {
    NULL, gate_malloc, gate_calloc, gate_realloc, gate_free};

/* The hooks for each domain, from the name CPython gives its current
 * allocators (NULL when they are not all CPython's own). */
static void
choose_hooks(const lc__allocator *hooks[LC__DOMAINS])
{
    typedef const char *(*name_fn)(void);
    name_fn fn;
    const char *name = NULL;
    int d;

    *(void **)&fn = dlsym(RTLD_DEFAULT, "_PyMem_GetCurrentAllocatorName");
    if (fn != NULL)
        name = fn();
    for (d = 0; d < LC__DOMAINS; d++)
        hooks[d] = &table_hooks;
    if (name == NULL)
        return;
    if (strcmp(name, "pymalloc") == 0) {
        hooks[LC__DOMAIN_RAW] = &direct_hooks;
        for (d = 0; d < LC__DOMAINS; d++)
            if (d != LC__DOMAIN_RAW)
                hooks[d] = &forward_hooks;
    } else if (strcmp(name, "malloc") == 0) {
        for (d = 0; d < LC__DOMAINS; d++)
            hooks[d] = &direct_hooks;
    } else if (strcmp(name, "pymalloc_debug") == 0 ||
               strcmp(name, "malloc_debug") == 0) {
        for (d = 0; d < LC__DOMAINS; d++)
            hooks[d] = &debug_hooks;
        debug_on_pymalloc = strcmp(name, "pymalloc_debug") == 0;
    }
}

/* 1 when `a` is one of our hooks. */
static int
is_ours(const lc__allocator *a)
{
    return a->malloc == table_malloc || a->malloc == direct_malloc ||
           a->malloc == forward_malloc || a->malloc == debug_malloc ||
           a->malloc == gate_malloc;
}

/* Where our hook is in domain d's chain. */
enum {
    PATH_OFF,                  /* not reached: taken out                  */
    PATH_TOP,                  /* ours on top (a gate included)           */
    PATH_BELOW                 /* another hook on top forwards to ours    */
};

/* Where our hook is in domain d's chain, or -1 when that cannot be told
 * (no memory).  Below another hook is seen, not guessed: one byte
 * allocated through the domain and freed, and whether this thread's
 * count moved meanwhile. */
static int
on_path(lc__get_alloc_fn get, int d)
{
    lc__allocator top;
    lc__counts *c = my_counts;
    int64_t before;
    void *p;

    get(d, &top);
    if (is_ours(&top))
        return PATH_TOP;
    if (c == NULL && (c = counts_slow()) == NULL)
        return -1;
    before = c->allocs;
    p = top.malloc(top.ctx, 1);
    if (p == NULL)
        return -1;
    d = c->allocs != before ? PATH_BELOW : PATH_OFF;
    top.free(top.ctx, p);
    return d;
}

/* A generation of links, never freed; NULL when no memory is left. */
static lc__link *
new_generation(void)
{
    if (pool_left == 0) {
        void *m = mmap(NULL, LC__POOL_BYTES, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        pool = m;
        pool_left = LC__POOL_BYTES / sizeof(lc__generation);
    }
    pool_left--;
    return *pool++;
}

/* Installs a generation: hooks[d] over what domain d runs now, for each
 * domain whose hooks[d] is not NULL.  0, or LC_ENOMEM (nothing changed). */
static int
install_unlocked(lc__get_alloc_fn get, lc__set_alloc_fn set,
                 const lc__allocator *hooks[LC__DOMAINS])
{
    lc__link *gen = new_generation();
    int d;

    if (gen == NULL)
        return LC_ENOMEM;
    for (d = 0; d < LC__DOMAINS; d++) {
        if (hooks[d] == NULL)
            continue;
        get(d, &gen[d].prev);
        gen[d].domain = d;
    }
    for (d = 0; d < LC__DOMAINS; d++) {
        lc__allocator mine;
        if (hooks[d] == NULL)
            continue;
        mine = *hooks[d];
        mine.ctx = &gen[d];
        set(d, &mine);
    }
    installed++;
    return LC_OK;
}

/* 1 when `hooks` has pymalloc's domains (mem and object) forwarded, or
 * under the debug hooks over pymalloc: the hooks that count its calls. */
static int
counts_pymalloc(const lc__allocator *hooks[LC__DOMAINS])
{
    return (hooks[1] == &forward_hooks && hooks[2] == &forward_hooks) ||
           (debug_on_pymalloc && hooks[1] == &debug_hooks &&
            hooks[2] == &debug_hooks);
}

/* Installs the hook the first time; later, puts a gate over a hook that
 * now sits on top of ours, and puts ours back where it was taken out.
 * When every domain is installed or put back, the hooks are chosen for
 * the allocators CPython runs now; a domain put back alone gets the
 * table's hooks, which need no help from the others.  Returns LC_OK, 1
 * when a domain was put back (the counters missed what was allocated
 * meanwhile), or a negative status. */
int
lc__pyhook_install(void *get_allocator, void *set_allocator)
{
    lc__get_alloc_fn get = (lc__get_alloc_fn)get_allocator;
    lc__set_alloc_fn set = (lc__set_alloc_fn)set_allocator;
    const lc__allocator *back[LC__DOMAINS], *gates[LC__DOMAINS];
    int d, missing = 0, below = 0, rc;

    if (get == NULL || set == NULL)
        return LC_EUNAVAIL;
    if (!installed) {
        if (pthread_key_create(&counts_key, release_counts) != 0)
            return LC_ESYS;
        choose_hooks(back);
        if ((rc = install_unlocked(get, set, back)) == LC_OK)
            pymalloc_counted = counts_pymalloc(back);
        return rc;
    }
    for (d = 0; d < LC__DOMAINS; d++) {
        int where = on_path(get, d);
        if (where < 0)
            return LC_ENOMEM;
        back[d] = where == PATH_OFF ? &table_hooks : NULL;
        gates[d] = where == PATH_BELOW ? &gate_hooks : NULL;
        missing += where == PATH_OFF;
        below += where == PATH_BELOW;
    }
    if (below && (rc = install_unlocked(get, set, gates)) != LC_OK)
        return rc;
    if (missing == 0)
        return LC_OK;
    if (missing == LC__DOMAINS)
        choose_hooks(back);
    if ((rc = install_unlocked(get, set, back)) != LC_OK)
        return rc;
    /* A domain put back alone runs the table's hooks, which do not count
     * pymalloc's blocks apart; all three put back count them afresh. */
    pymalloc_counted = missing == LC__DOMAINS
                           ? counts_pymalloc(back)
                           : pymalloc_counted && back[1] == NULL &&
                                 back[2] == NULL;
    restored += missing;
    return 1;
}

int
lc__pyhook_on_top(void *get_allocator)
{
    lc__get_alloc_fn get = (lc__get_alloc_fn)get_allocator;
    lc__allocator top;
    int d;

    if (!installed || get == NULL)
        return 0;
    for (d = 0; d < LC__DOMAINS; d++) {
        get(d, &top);
        if (!is_ours(&top))
            return 0;
    }
    return 1;
}

int
lc__pyhook_release(void *get_allocator, void *set_allocator)
{
    lc__get_alloc_fn get = (lc__get_alloc_fn)get_allocator;
    lc__set_alloc_fn set = (lc__set_alloc_fn)set_allocator;
    int d, n = 0;

    if (!installed || get == NULL || set == NULL)
        return 0;
    for (d = LC__DOMAIN_RAW + 1; d < LC__DOMAINS; d++) {
        lc__allocator top;
        get(d, &top);
        if (!is_ours(&top))
            continue;
        /* Every link of ours on top, a gate included: what they forward
         * to is what allocated the blocks they handed out. */
        while (is_ours(&top))
            top = LINK(top.ctx)->prev;
        set(d, &top);
        n++;
    }
    return n;
}

int
lc__pyhook_restored(void)
{
    return restored;
}

int
lc__pyhook_read(int64_t *bytes, int64_t *allocs, int64_t *pymalloc)
{
    const lc__counts *c;
    int64_t n = 0, b = 0, k = 0;

    spin_lock(&reg_lock);
    for (c = all_counts; c != NULL; c = c->next) {
        n += __atomic_load_n(&c->allocs, __ATOMIC_RELAXED);
        b += __atomic_load_n(&c->bytes, __ATOMIC_RELAXED);
        k += __atomic_load_n(&c->pymalloc, __ATOMIC_RELAXED);
    }
    spin_unlock(&reg_lock);
    spin_lock(&table.lock);
    *bytes = b + table.bytes;
    spin_unlock(&table.lock);
    *allocs = n;
    *pymalloc = k;
    return pymalloc_counted;
}
