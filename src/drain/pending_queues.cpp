// Postgres regime: the list of pending queues a pass visits (see pending_queues.h).
#include "pg_includes.h"

#include <algorithm>

#include "drain/pending_queues.h"
#include "drain/queue_progress.h"
#include "hooks/commit_wakeup.h"

extern "C" {
#include "utils/memutils.h"
}

namespace {

const ActiveQueue* list = nullptr;  // the queue list the indexes refer to
int list_count = 0;
int* listed = nullptr;  // indexes of listed queues (ActiveQueue::listed says which)
int listed_count = 0;
int capacity = 0;

}  // namespace

void pending_queues_new_list(const ActiveQueue* queues, int nqueues)
{
    list = queues;
    list_count = nqueues;
    listed_count = 0;
    if (capacity < nqueues + 1) {
        capacity = nqueues + 1;
        listed = static_cast<int*>(listed == nullptr ? MemoryContextAlloc(TopMemoryContext, sizeof(int) * capacity)
                                                     : repalloc(listed, sizeof(int) * capacity));
    }
    for (int k = 0; k < nqueues; k++) {
        queues[k].listed = false;
        if (cached_queue_progress(queues[k].name, &queues[k].progress)->pending)
            want_queue(&queues[k]);
    }
}

void pending_queues_clear(void)
{
    for (int i = 0; i < listed_count; i++)
        list[listed[i]].listed = false;
    listed_count = 0;
}

void want_queue(const ActiveQueue* q)
{
    cached_queue_progress(q->name, &q->progress)->pending = true;
    if (q->listed)
        return;
    q->listed = true;
    listed[listed_count++] = static_cast<int>(q - list);
}

void want_queue_named(const char* queue)
{
    const ActiveQueue* q = active_queue_by_wake_hash(queue_wake_hash(queue));
    if (q != nullptr && strcmp(q->name, queue) == 0)
        want_queue(q);
}

int pending_queues_in_order(uint32 start, const int** order)
{
    int kept = 0;
    for (int i = 0; i < listed_count; i++) {
        const ActiveQueue* q = &list[listed[i]];
        if (cached_queue_progress(q->name, &q->progress)->pending)
            listed[kept++] = listed[i];
        else
            q->listed = false;
    }
    listed_count = kept;
    int n = list_count > 0 ? list_count : 1;
    int first = static_cast<int>(start % static_cast<uint32>(n));
    std::sort(listed, listed + listed_count,
              [first, n](int a, int b) { return (a - first + n) % n < (b - first + n) % n; });
    *order = listed;
    return listed_count;
}
