/*
 * own.c — memory for the engine's own objects (scopes, series and a
 * series' deltas), taken from mmap rather than malloc.
 *
 * The native_bytes probe reads malloc's heap.  A scope or series that is
 * live while another scope runs (crossed scopes: BEGIN a, BEGIN b, END a)
 * would otherwise count as that scope's growth; pages mapped here are in
 * none of the heaps the probe reads (glibc's mallinfo2, a sanitizer's
 * allocator, memcheck's blocks), so a verdict never includes leakcheck's
 * own objects.  A mapping holds its length in front of the object.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <stdint.h>
#include <sys/mman.h>

#define LC__OWN_HEADER 16       /* keeps the object 16-byte aligned        */

void *
lc__own_alloc(size_t size)
{
    size_t len;
    char *p;

    if (size > SIZE_MAX - LC__OWN_HEADER)
        return NULL;
    len = size + LC__OWN_HEADER;
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
             -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    *(size_t *)p = len;
    return p + LC__OWN_HEADER;    /* zero-filled, as calloc's */
}

void
lc__own_free(void *obj)
{
    char *p;

    if (obj == NULL)
        return;
    p = (char *)obj - LC__OWN_HEADER;
    munmap(p, *(size_t *)p);
}
