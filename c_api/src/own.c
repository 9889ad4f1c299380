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

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define LC__OWN_HEADER 16       /* keeps the object 16-byte aligned        */

/*
 * Mappings freed are kept for reuse, a few and small ones only: a scope
 * opened and closed per test would otherwise pay an mmap, a munmap and a
 * page fault each time (about a quarter of a clean macro scope's cost).
 */
#define LC__OWN_KEPT 8
#define LC__OWN_KEPT_MAX (64 * 1024)

static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static char *kept[LC__OWN_KEPT];        /* mappings, their length in front */

static size_t
page_round(size_t len)
{
    static size_t page;

    if (page == 0) {
        long ps = sysconf(_SC_PAGESIZE);
        page = ps > 0 ? (size_t)ps : 4096;
    }
    return (len + page - 1) / page * page;
}

void *
lc__own_alloc(size_t size)
{
    size_t len;
    char *p = NULL;
    int i;

    if (size > SIZE_MAX - LC__OWN_HEADER - 65536)
        return NULL;
    len = page_round(size + LC__OWN_HEADER);
    if (len <= LC__OWN_KEPT_MAX) {
        pthread_mutex_lock(&kept_lock);
        for (i = 0; i < LC__OWN_KEPT; i++) {
            if (kept[i] != NULL && *(size_t *)kept[i] == len) {
                p = kept[i];
                kept[i] = NULL;
                break;
            }
        }
        pthread_mutex_unlock(&kept_lock);
        if (p != NULL) {
            memset(p + LC__OWN_HEADER, 0, len - LC__OWN_HEADER);
            return p + LC__OWN_HEADER;      /* zero-filled, as calloc's */
        }
    }
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
    size_t len;
    int i;

    if (obj == NULL)
        return;
    p = (char *)obj - LC__OWN_HEADER;
    len = *(size_t *)p;
    if (len <= LC__OWN_KEPT_MAX) {
        pthread_mutex_lock(&kept_lock);
        for (i = 0; i < LC__OWN_KEPT; i++) {
            if (kept[i] == NULL) {
                kept[i] = p;
                p = NULL;
                break;
            }
        }
        pthread_mutex_unlock(&kept_lock);
        if (p == NULL)
            return;
    }
    munmap(p, len);
}
