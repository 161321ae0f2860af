/* Decode queries cut into work items, shared by the decode attention kernels (attention.c on
 * AVX-512, attention_amx.c on AMX tiles).
 *
 * Queries are grouped by the pool row they read (a request's pending token, then its drafts),
 * groups in order of first appearance; without slots every query is a group of its own. An
 * item is up to `per` (query, head) rows of one group and one KV head, whole queries where a
 * KV head's query heads fit: one read of the row's keys and values serves them all. While that
 * leaves a thread without a second item, items take fewer queries (a row's cost is its own:
 * the split only trades balance against reading a row's keys once).
 */
#ifndef APPLIANCE_KERNELS_DECODE_ITEMS_H
#define APPLIANCE_KERNELS_DECODE_ITEMS_H

#include <stdint.h>
#include <stdlib.h>

#include "vec.h"

typedef struct {
    int *member; /* query indices, group by group */
    int *start;  /* group gi's queries: member[start[gi] .. start[gi] + count[gi] - 1] */
    int *count;
    int *item_at; /* item i: (group, KV head, first row within the group's rows) */
    int groups, items, per, group, hkv; /* group: query heads per KV head */
} decode_items;

/* Checks every row read and every length against the pool (-2 if one is out of range), then
 * builds the items of at most `max_rows` rows (0, or -1 when out of memory). *longest gets
 * the most keys a query sees. Free with decode_items_free, whatever it returns. */
static inline int decode_items_build(decode_items *it, int n, const int32_t *lengths,
                                     const int32_t *slots, int pool_rows, int capacity,
                                     int shared, int hq, int hkv, int max_rows, int n_threads,
                                     int *longest) {
    it->member = it->item_at = NULL;
    it->groups = it->items = 0;
    it->group = hq / hkv;
    it->hkv = hkv;
    /* every row read and every length in range of the pool: checked here, in the one pass
     * over lengths the kernel makes anyway, rather than by reductions in every layer's caller */
    *longest = 0;
    for (int r = 0; r < n; r++) {
        const int row = slots ? slots[r] : r;
        if (row < 0 || row >= pool_rows) return -2;
        if (lengths[r] < 1 || lengths[r] > capacity || lengths[r] <= (n > 1 ? shared : 0))
            return -2;
        if (lengths[r] > *longest) *longest = lengths[r];
    }
    it->member = malloc(sizeof(int) * (3 * (size_t)n + 1));
    int *group_of = slots ? calloc((size_t)pool_rows, sizeof(int)) : NULL;
    if (!it->member || (slots && !group_of)) {
        free(group_of);
        return -1;
    }
    it->start = it->member + n;
    it->count = it->start + n + 1;
    int *start = it->start, *count = it->count, groups = 0;
    for (int r = 0; r < n; r++) {
        const int gi = group_of ? group_of[slots[r]] - 1 : -1;
        if (gi >= 0) {
            count[gi]++;
            continue;
        }
        if (group_of) group_of[slots[r]] = groups + 1;
        count[groups++] = 1;
    }
    start[0] = 0;
    for (int gi = 0; gi < groups; gi++) start[gi + 1] = start[gi] + count[gi];
    for (int gi = 0; gi < groups; gi++) count[gi] = 0;
    for (int r = 0, next = 0; r < n; r++) {
        const int gi = group_of ? group_of[slots[r]] - 1 : next++;
        it->member[start[gi] + count[gi]++] = r;
    }
    free(group_of);
    it->groups = groups;
    const int group = it->group;
    int per = group <= max_rows ? max_rows / group * group : max_rows, items = 0;
    const int want = 2 * (n_threads < 1 ? 1 : n_threads);
    for (;;) {
        items = 0;
        for (int gi = 0; gi < groups; gi++) items += hkv * ((count[gi] * group + per - 1) / per);
        if (items >= want || per <= group || group > max_rows) break;
        per -= group;
    }
    it->per = per;
    it->items = items;
    it->item_at = malloc(sizeof(int) * 3 * (size_t)items);
    if (!it->item_at) return -1;
    for (int gi = 0, i = 0; gi < groups; gi++)
        for (int g = 0; g < hkv; g++)
            for (int off = 0; off < count[gi] * group; off += per, i++) {
                it->item_at[3 * i] = gi;
                it->item_at[3 * i + 1] = g;
                it->item_at[3 * i + 2] = off;
            }
    return 0;
}

static inline void decode_items_free(decode_items *it) {
    free(it->member);
    free(it->item_at);
}

/* Item `item`'s rows: query row i's query and output pointers, its keys (lim[i]) and, where
 * `index` is given, its query index times hq plus its head; returns the row count, and the
 * pool row, KV head and largest lim of the item. */
static inline int decode_item_rows(const decode_items *it, int item, const bf16 *q, int64_t q_row,
                                   int64_t q_head, bf16 *out, int64_t o_row, int64_t o_head,
                                   const int32_t *lengths, const int32_t *slots,
                                   const bf16 **qrow, bf16 **orow, int *lim, int *index,
                                   int64_t *slot, int *kv_head, int *own) {
    const int gi = it->item_at[3 * item], g = it->item_at[3 * item + 1];
    const int off = it->item_at[3 * item + 2], group = it->group;
    const int total = it->count[gi] * group;
    const int rows = total - off < it->per ? total - off : it->per;
    const int first = it->member[it->start[gi]];
    *slot = slots ? slots[first] : first;
    *kv_head = g;
    *own = 0;
    for (int i = 0; i < rows; i++) {
        const int r = it->member[it->start[gi] + (off + i) / group];
        const int h = g * group + (off + i) % group;
        qrow[i] = q + (int64_t)r * q_row + (int64_t)h * q_head;
        orow[i] = out + (int64_t)r * o_row + (int64_t)h * o_head;
        lim[i] = lengths[r];
        if (index) index[i] = r * group * it->hkv + h;
        *own = lim[i] > *own ? lim[i] : *own;
    }
    return rows;
}

#endif
