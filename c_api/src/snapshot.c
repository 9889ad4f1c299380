/*
 * snapshot.c — taking snapshots: which probes can be read, the collection
 * that comes first, and waiting for threads that are about to end.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int thread_settle_ms = 200;

/* Native availability does not change during a process's life, and
 * asking costs system calls: asked once, for every native probe, by the
 * first thread that needs it. */
static unsigned native_ok;
static pthread_once_t native_once = PTHREAD_ONCE_INIT;

static void
ask_native(void)
{
    int p;

    for (p = 0; p < LC_PROBE_COUNT; p++)
        if (!lc__probes[p].python && lc__native_unavailable(p) == NULL)
            native_ok |= LC_PROBE_BIT(p);
}

int
lc_set_thread_settle_ms(int ms)
{
    if (ms < 0)
        return LC_EINVAL;
    thread_settle_ms = ms;
    return LC_OK;
}

unsigned
lc__probes_readable(unsigned wanted)
{
    unsigned mask = 0;
    int p;

    for (p = 0; p < LC_PROBE_COUNT; p++) {
        unsigned bit = LC_PROBE_BIT(p);
        if (!(wanted & bit))
            continue;
        if (lc__probes[p].python) {
            if (lc__python_unavailable(p) == NULL)
                mask |= bit;
        } else {
            pthread_once(&native_once, ask_native);
            mask |= wanted & native_ok & bit;
        }
    }
    return mask;
}

lc_snapshot *
lc_snapshot_new(void)
{
    return calloc(1, sizeof(lc_snapshot));
}

void
lc_snapshot_free(lc_snapshot *snap)
{
    free(snap);
}

int
lc_snapshot_take(lc_snapshot *snap, unsigned probes, unsigned flags)
{
    unsigned mask;

    if (snap == NULL || (probes & ~LC_PROBES_ALL))
        return LC_EINVAL;
    mask = lc__probes_readable(probes);
    snap->mask = 0;
    /* With CPython up, every snapshot starts with a settled, collected
     * interpreter, even one of native probes only: Python objects hold
     * native memory and descriptors too. */
    if (lc__python_unavailable(LC_PROBE_BLOCKS) == NULL)
        return lc__python_snapshot(snap, mask, flags);
    lc__native_read(snap, mask, flags);
    return LC_OK;
}

unsigned
lc_snapshot_probes(const lc_snapshot *snap)
{
    return snap ? snap->mask : 0;
}

int
lc_snapshot_value(const lc_snapshot *snap, int probe, int64_t *value)
{
    if (probe < 0 || probe >= LC_PROBE_COUNT)
        return LC_ENOPROBE;
    if (snap == NULL || value == NULL)
        return LC_EINVAL;
    if (!(snap->mask & LC_PROBE_BIT(probe)))
        return LC_EUNAVAIL;
    *value = snap->values[probe];
    return LC_OK;
}

/*
 * A thread that was told to stop, or was joined a moment ago, may still be
 * listed for a while, and what it frees as it ends (its thread state, its
 * stack cache) would count as growth in the other probes: extra threads
 * get the settle time to go away *before* anything is read, and the
 * thread count is read again after, for threads that ended meanwhile.
 */
static int64_t
wait_for_threads(int64_t baseline)
{
    const struct timespec pause = {0, 2 * 1000 * 1000};
    int64_t now = lc__threads_now();
    int waited = 0;

    while (now > baseline && waited < thread_settle_ms) {
        nanosleep(&pause, NULL);
        waited += 2;
        now = lc__threads_now();
    }
    return now;
}

int
lc__snapshot_settled(lc_snapshot *snap, unsigned mask, unsigned flags,
                     const lc_snapshot *baseline)
{
    const unsigned bit = LC_PROBE_BIT(LC_PROBE_THREADS);
    int watch = baseline != NULL && (baseline->mask & bit) && (mask & bit);
    int rc;

    if (watch)
        wait_for_threads(baseline->values[LC_PROBE_THREADS]);
    rc = lc_snapshot_take(snap, mask, flags);
    if (rc == LC_OK && watch && (snap->mask & bit)) {
        int64_t now = wait_for_threads(baseline->values[LC_PROBE_THREADS]);
        if (now >= 0)
            snap->values[LC_PROBE_THREADS] = now;
    }
    return rc;
}
