/*
 * sitetab.h — the table of live blocks that an allocator hook fills while a
 * scope or series records allocating sites.  Shared by the engine (sites.c,
 * whose AddressSanitizer hooks fill one) and the tracer preloaded into a
 * plain glibc process (c_api/trace/trace.c, which fills its own and hands
 * the engine a pointer to it through lc_trace_table_v1()).
 *
 * The table is lock-free: a hook may run in any thread, in a signal handler
 * that interrupted another hook, or in the child of a fork() taken while
 * another thread held a slot, and it never waits.  It never allocates
 * through malloc: the slots are one anonymous mapping, made once.
 *
 * A slot's key goes EMPTY or DEAD -> BUSY (claimed by compare-and-swap) ->
 * the block's address (published with release once size and stack are
 * written) -> DEAD when the block is freed.  A block is looked for at most
 * LC__SITE_PROBES slots from its hash; when none is free there, it is not
 * recorded and `dropped` counts it (the report says so).  The free hook
 * runs before the block is given back, so an address is removed before the
 * allocator can hand it out again.
 */
#ifndef LC_SITETAB_H
#define LC_SITETAB_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define LC__SITE_FRAMES 14      /* return addresses kept per block         */
#define LC__SITE_SLOTS (1u << 17) /* 16 MiB of address space, touched lazily */
#define LC__SITE_PROBES 32

#define LC__SITE_EMPTY ((uintptr_t)0)
#define LC__SITE_DEAD ((uintptr_t)1)
#define LC__SITE_BUSY ((uintptr_t)2)

/* What the table records: nothing, only frees (a snapshot is being taken:
 * what it allocates is the engine's, but a block it frees is gone), or
 * allocations and frees. */
enum { LC__SITES_OFF = 0, LC__SITES_FREES = 1, LC__SITES_ALL = 2 };

typedef struct lc__site_slot {
    _Atomic uintptr_t key;          /* the block's address, or a marker    */
    size_t size;                    /* bytes asked for                     */
    void *pc[LC__SITE_FRAMES];      /* return addresses, innermost first;
                                     * NULL after the last (the tracer's
                                     * table only)                         */
} lc__site_slot;

typedef struct lc__site_table {
    _Atomic int state;              /* LC__SITES_*                         */
    _Atomic unsigned long dropped;  /* blocks not recorded: no free slot   */
    lc__site_slot *slots;           /* LC__SITE_SLOTS of them, or NULL     */
    const char *unavailable;        /* the tracer's: why it cannot record
                                     * here (a static line), else NULL     */
} lc__site_table;

/* Maps the slots; 0, or -1 when the mapping failed. */
static inline int
lc__sitetab_map(lc__site_table *t)
{
    void *p = mmap(NULL, LC__SITE_SLOTS * sizeof(lc__site_slot),
                   PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

    if (p == MAP_FAILED)
        return -1;
    t->slots = p;
    return 0;
}

/* Empties the table (its pages go back to the kernel and read as zeros). */
static inline void
lc__sitetab_reset(lc__site_table *t)
{
    if (t->slots != NULL)
        madvise(t->slots, LC__SITE_SLOTS * sizeof(lc__site_slot),
                MADV_DONTNEED);
    atomic_store(&t->dropped, 0);
}

static inline size_t
lc__sitetab_hash(uintptr_t key)
{
    uint64_t h = (uint64_t)(key >> 4) * UINT64_C(0x9e3779b97f4a7c15);

    return (size_t)(h >> 40) & (LC__SITE_SLOTS - 1);
}

/* Claims a slot for `key` and returns it (BUSY: the caller fills it in,
 * then calls lc__sitetab_publish), or NULL when none was free.  A slot
 * still holding this address is stale (the block was freed where no hook
 * saw it) and is taken over; else the first free slot is taken.  A key
 * never sits past an EMPTY slot of its run, so the search stops there. */
static inline lc__site_slot *
lc__sitetab_claim(lc__site_table *t, uintptr_t key)
{
    int attempt;

    for (attempt = 0; attempt < 4; attempt++) {
        size_t i = lc__sitetab_hash(key), n;
        lc__site_slot *first_free = NULL;
        uintptr_t k;

        for (n = 0; n < LC__SITE_PROBES;
             n++, i = (i + 1) & (LC__SITE_SLOTS - 1)) {
            lc__site_slot *s = &t->slots[i];
            k = atomic_load_explicit(&s->key, memory_order_relaxed);
            if (k == key &&
                atomic_compare_exchange_strong(&s->key, &k, LC__SITE_BUSY))
                return s;
            if ((k == LC__SITE_EMPTY || k == LC__SITE_DEAD) &&
                first_free == NULL)
                first_free = s;
            if (k == LC__SITE_EMPTY)
                break;
        }
        if (first_free == NULL)
            break;
        k = atomic_load_explicit(&first_free->key, memory_order_relaxed);
        if ((k == LC__SITE_EMPTY || k == LC__SITE_DEAD) &&
            atomic_compare_exchange_strong(&first_free->key, &k,
                                           LC__SITE_BUSY))
            return first_free;
        /* another thread took it meanwhile: search again */
    }
    atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
    return NULL;
}

static inline void
lc__sitetab_publish(lc__site_slot *s, uintptr_t key)
{
    atomic_store_explicit(&s->key, key, memory_order_release);
}

/* Forgets `key` if it is in the table. */
static inline void
lc__sitetab_remove(lc__site_table *t, uintptr_t key)
{
    size_t i = lc__sitetab_hash(key), n;

    for (n = 0; n < LC__SITE_PROBES; n++, i = (i + 1) & (LC__SITE_SLOTS - 1)) {
        lc__site_slot *s = &t->slots[i];
        uintptr_t k = atomic_load_explicit(&s->key, memory_order_relaxed);
        if (k == LC__SITE_EMPTY)
            return;
        if (k == key) {
            atomic_compare_exchange_strong(&s->key, &k, LC__SITE_DEAD);
            return;
        }
    }
}

/* The hooks' two entry points, for a block of `size` bytes at `p` (the
 * stack is filled by the caller of lc__sitetab_claim when it keeps one). */
static inline void
lc__sitetab_freed(lc__site_table *t, const volatile void *p)
{
    if (p != NULL && t->slots != NULL &&
        atomic_load_explicit(&t->state, memory_order_relaxed) !=
            LC__SITES_OFF)
        lc__sitetab_remove(t, (uintptr_t)p);
}

/* ---- descriptors ---------------------------------------------------------
 * The tracer also keeps, for each descriptor number below LC__FD_SLOTS, the
 * stack of the call that opened it while the table's state is
 * LC__SITES_ALL, and forgets it when the descriptor is closed (at any
 * state: a number closed and opened again outside the recording names
 * nothing).  A slot's key goes EMPTY -> BUSY (claimed) -> OPEN (published
 * once the stack is written); a close stores EMPTY, so that a close racing
 * the record of the same number leaves the slot empty.  One anonymous
 * mapping, made once, indexed by the number. */
#define LC__FD_SLOTS 4096
#define LC__FD_OPEN ((uintptr_t)3)

typedef struct lc__fd_slot {
    _Atomic uintptr_t key;          /* EMPTY, BUSY or LC__FD_OPEN          */
    void *pc[LC__SITE_FRAMES];      /* return addresses, innermost first   */
} lc__fd_slot;

/* The slots, or NULL when the mapping failed. */
static inline lc__fd_slot *
lc__fdtab_map(void)
{
    void *p = mmap(NULL, LC__FD_SLOTS * sizeof(lc__fd_slot),
                   PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

    return p == MAP_FAILED ? NULL : p;
}

static inline void
lc__fdtab_reset(lc__fd_slot *slots)
{
    if (slots != NULL)
        madvise(slots, LC__FD_SLOTS * sizeof(lc__fd_slot), MADV_DONTNEED);
}

/* Claims the slot of `fd` (the caller writes its stack, then calls
 * lc__fdtab_publish), or NULL when it is out of range or being written. */
static inline lc__fd_slot *
lc__fdtab_claim(lc__fd_slot *slots, int fd)
{
    lc__fd_slot *s;
    uintptr_t k;

    if (slots == NULL || fd < 0 || fd >= (int)LC__FD_SLOTS)
        return NULL;
    s = &slots[fd];
    k = atomic_load_explicit(&s->key, memory_order_relaxed);
    if (k == LC__SITE_BUSY ||
        !atomic_compare_exchange_strong(&s->key, &k, LC__SITE_BUSY))
        return NULL;
    return s;
}

/* Publishes a claimed slot, unless the descriptor was closed meanwhile. */
static inline void
lc__fdtab_publish(lc__fd_slot *s)
{
    uintptr_t k = LC__SITE_BUSY;

    atomic_compare_exchange_strong_explicit(&s->key, &k, LC__FD_OPEN,
                                            memory_order_release,
                                            memory_order_relaxed);
}

static inline void
lc__fdtab_closed(lc__fd_slot *slots, int fd)
{
    if (slots != NULL && fd >= 0 && fd < (int)LC__FD_SLOTS &&
        atomic_load_explicit(&slots[fd].key, memory_order_relaxed) !=
            LC__SITE_EMPTY)
        atomic_store_explicit(&slots[fd].key, LC__SITE_EMPTY,
                              memory_order_relaxed);
}

#endif /* LC_SITETAB_H */
