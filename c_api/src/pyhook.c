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
 * Each domain owns a table of the live blocks allocated through the hook,
 * pointer -> size, so a free can subtract the size it did not receive.
 * Blocks allocated before the hook was installed are unknown and their
 * frees are ignored: readings are "live blocks allocated since install",
 * which is what a delta between two snapshots needs.  Tables live in
 * mmap'd memory so they never show up in the native_bytes probe.
 *
 * Locking: one spin lock per table, held only around table updates (never
 * across a call to the previous allocator).  The raw domain is called
 * without the GIL, and 3.12's per-interpreter GILs let the other domains
 * run in parallel too.  A block is removed from its table before it is
 * handed back to the allocator, so an address re-used by another thread
 * cannot be confused with it.
 */
#define _GNU_SOURCE
#include "internal.h"

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
#define LC__MIN_SLOTS 4096     /* first table: 64 KiB                     */

typedef struct {
    uintptr_t key;             /* block address; 0 marks an empty slot    */
    size_t size;               /* bytes requested                         */
} lc__slot;

typedef struct {
    lc__allocator prev;        /* the allocator we forward to; set once   */
    char lock;                 /* spin lock for the fields below          */
    lc__slot *slots;           /* open addressing, linear probing         */
    size_t mask;               /* slot count - 1 (a power of two)         */
    size_t used;               /* live entries                            */
    int64_t bytes;             /* sum of their sizes                      */
    int64_t untracked;         /* blocks not tracked for lack of memory   */
} lc__table;

static lc__table tables[LC__DOMAINS];
static int installed;          /* written once, with the GIL held         */
static __thread int in_hook __attribute__((tls_model("initial-exec")));

static inline void
lock(lc__table *t)
{
    int spins = 0;
    while (__atomic_test_and_set(&t->lock, __ATOMIC_ACQUIRE)) {
        if (++spins > 64) {
            sched_yield();
            spins = 0;
        }
    }
}

static inline void
unlock(lc__table *t)
{
    __atomic_clear(&t->lock, __ATOMIC_RELEASE);
}

static inline size_t
slot_of(uintptr_t key, size_t mask)
{
    /* Blocks are 16-byte aligned: drop those bits, then Fibonacci-hash. */
    return (size_t)(((key >> 4) * UINT64_C(0x9E3779B97F4A7C15)) >> 20) & mask;
}

static lc__slot *
slots_alloc(size_t n)
{
    void *p = mmap(NULL, n * sizeof(lc__slot), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;   /* zero-filled: all empty */
}

/* Doubles the table; lock held.  0, or -1 when no memory (table kept). */
static int
grow(lc__table *t)
{
    size_t n = t->slots ? (t->mask + 1) * 2 : LC__MIN_SLOTS, i;
    lc__slot *s = slots_alloc(n);

    if (s == NULL)
        return -1;
    if (t->slots) {
        for (i = 0; i <= t->mask; i++) {
            uintptr_t k = t->slots[i].key;
            if (k) {
                size_t j = slot_of(k, n - 1);
                while (s[j].key)
                    j = (j + 1) & (n - 1);
                s[j] = t->slots[i];
            }
        }
        munmap(t->slots, (t->mask + 1) * sizeof(lc__slot));
    }
    t->slots = s;
    t->mask = n - 1;
    return 0;
}

/* Lock held. */
static void
track_unlocked(lc__table *t, void *ptr, size_t size)
{
    uintptr_t key = (uintptr_t)ptr;
    size_t i;

    if ((t->used + 1) * 2 > t->mask + 1 || t->slots == NULL) {
        if (grow(t) != 0) {
            t->untracked++;
            return;
        }
    }
    i = slot_of(key, t->mask);
    while (t->slots[i].key) {
        if (t->slots[i].key == key) {   /* cannot happen for live blocks */
            t->bytes += (int64_t)size - (int64_t)t->slots[i].size;
            t->slots[i].size = size;
            return;
        }
        i = (i + 1) & t->mask;
    }
    t->slots[i].key = key;
    t->slots[i].size = size;
    t->used++;
    t->bytes += (int64_t)size;
}

/* Removes ptr; lock held.  Returns its size, or (size_t)-1 when unknown. */
static size_t
untrack_unlocked(lc__table *t, void *ptr)
{
    uintptr_t key = (uintptr_t)ptr;
    size_t i, j, size;

    if (t->slots == NULL || ptr == NULL)
        return (size_t)-1;
    i = slot_of(key, t->mask);
    while (t->slots[i].key != key) {
        if (t->slots[i].key == 0)
            return (size_t)-1;
        i = (i + 1) & t->mask;
    }
    size = t->slots[i].size;
    t->used--;
    t->bytes -= (int64_t)size;
    /* Backward-shift deletion keeps every probe sequence unbroken. */
    for (j = (i + 1) & t->mask; t->slots[j].key; j = (j + 1) & t->mask) {
        size_t home = slot_of(t->slots[j].key, t->mask);
        if (((j - home) & t->mask) >= ((j - i) & t->mask)) {
            t->slots[i] = t->slots[j];
            i = j;
        }
    }
    t->slots[i].key = 0;
    return size;
}

static void *
hook_malloc(void *ctx, size_t size)
{
    lc__table *t = ctx;
    void *p;

    if (in_hook)
        return t->prev.malloc(t->prev.ctx, size);
    in_hook = 1;
    p = t->prev.malloc(t->prev.ctx, size);
    if (p != NULL) {
        lock(t);
        track_unlocked(t, p, size);
        unlock(t);
    }
    in_hook = 0;
    return p;
}

static void *
hook_calloc(void *ctx, size_t nelem, size_t elsize)
{
    lc__table *t = ctx;
    void *p;

    if (in_hook)
        return t->prev.calloc(t->prev.ctx, nelem, elsize);
    in_hook = 1;
    p = t->prev.calloc(t->prev.ctx, nelem, elsize);
    if (p != NULL) {
        lock(t);
        track_unlocked(t, p, nelem * elsize);  /* no overflow: p != NULL */
        unlock(t);
    }
    in_hook = 0;
    return p;
}

static void *
hook_realloc(void *ctx, void *ptr, size_t new_size)
{
    lc__table *t = ctx;
    size_t old = (size_t)-1;
    void *p;

    if (in_hook)
        return t->prev.realloc(t->prev.ctx, ptr, new_size);
    in_hook = 1;
    if (ptr != NULL) {
        lock(t);
        old = untrack_unlocked(t, ptr);
        unlock(t);
    }
    p = t->prev.realloc(t->prev.ctx, ptr, new_size);
    lock(t);
    if (p != NULL)
        track_unlocked(t, p, new_size);
    else if (old != (size_t)-1)
        track_unlocked(t, ptr, old);     /* failed: ptr is still live */
    unlock(t);
    in_hook = 0;
    return p;
}

static void
hook_free(void *ctx, void *ptr)
{
    lc__table *t = ctx;

    if (in_hook || ptr == NULL) {
        t->prev.free(t->prev.ctx, ptr);
        return;
    }
    in_hook = 1;
    lock(t);
    untrack_unlocked(t, ptr);
    unlock(t);
    t->prev.free(t->prev.ctx, ptr);
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
    for (d = 0; d < LC__DOMAINS; d++) {
        lc__allocator mine;
        get(d, &tables[d].prev);
        mine.ctx = &tables[d];
        mine.malloc = hook_malloc;
        mine.calloc = hook_calloc;
        mine.realloc = hook_realloc;
        mine.free = hook_free;
        set(d, &mine);
    }
    installed = 1;
    return LC_OK;
}

int
lc__pyhook_installed(void)
{
    return installed;
}

void
lc__pyhook_read(int64_t *bytes, int64_t *allocs)
{
    int64_t b = 0, n = 0;
    int d;

    for (d = 0; d < LC__DOMAINS; d++) {
        lock(&tables[d]);
        b += tables[d].bytes;
        n += (int64_t)tables[d].used;
        unlock(&tables[d]);
    }
    *bytes = b;
    *allocs = n;
}
