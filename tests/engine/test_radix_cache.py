"""Tests for engine.embedded.radix_cache: a radix tree of KV tensors with LRU eviction."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from engine.embedded.radix_cache import RadixKVCache, match_length  # noqa: E402

LAYERS, HEADS, DIM = 2, 2, 4


def make_kv(ids, extra: int = 0):
    """Per-layer (k, v) of shape [1, HEADS, len(ids) + extra, DIM] encoding token and layer.

    ``k[0, h, t, :] == 100 * layer + token_id + h / 10`` and ``v == -k``, so every slice can be
    checked against the token ids it claims to hold. ``extra`` trailing positions hold -1.
    """
    out = []
    for layer in range(LAYERS):
        k = torch.full((1, HEADS, len(ids) + extra, DIM), -1.0)
        for t, tok in enumerate(ids):
            for h in range(HEADS):
                k[0, h, t, :] = 100 * layer + tok + h / 10
        out.append((k, -k))
    return out


def assert_kv_for(kv, ids):
    expected = make_kv(ids)
    assert len(kv) == LAYERS
    for (k, v), (ek, ev) in zip(kv, expected, strict=True):
        assert k.shape == (1, HEADS, len(ids), DIM)
        assert v.shape == (1, HEADS, len(ids), DIM)
        assert torch.equal(k, ek)
        assert torch.equal(v, ev)


def tree_tokens(cache: RadixKVCache) -> int:
    """Sum of edge lengths, walking the tree (independent of ``total_tokens``)."""
    total, stack = 0, [cache.root]
    while stack:
        node = stack.pop()
        total += len(node.tokens)
        for first, child in node.children.items():
            assert child.tokens and child.tokens[0] == first
            assert child.parent is node
            for k, v in child.kv:
                assert k.shape[2] == v.shape[2] == len(child.tokens)
            stack.append(child)
    return total


def distinct_prefixes(*seqs) -> int:
    return len({tuple(s[: i + 1]) for s in seqs for i in range(len(s))})


# --- matching ---------------------------------------------------------------------------


def test_empty_cache_matches_nothing():
    cache = RadixKVCache(budget_tokens=100)
    assert cache.match([1, 2, 3]) == (0, [])
    assert cache.match([]) == (0, [])
    assert match_length(cache, [1, 2, 3]) == 0
    assert cache.total_tokens == 0


def test_insert_then_match_same_ids():
    cache = RadixKVCache(budget_tokens=100)
    ids = [5, 6, 7, 8, 9]
    cache.insert(ids, make_kv(ids))
    n, kv = cache.match(ids)
    assert n == len(ids)
    assert_kv_for(kv, ids)
    assert cache.total_tokens == 5
    assert tree_tokens(cache) == 5


def test_insert_uses_only_the_first_len_ids_positions():
    cache = RadixKVCache(budget_tokens=100)
    ids = [1, 2, 3]
    cache.insert(ids, make_kv(ids, extra=4))  # KV longer than the ids
    n, kv = cache.match(ids)
    assert n == 3
    assert_kv_for(kv, ids)
    assert cache.total_tokens == 3


def test_match_longer_query_returns_cached_prefix():
    cache = RadixKVCache(budget_tokens=100)
    cache.insert([1, 2, 3], make_kv([1, 2, 3]))
    n, kv = cache.match([1, 2, 3, 4, 5])
    assert n == 3
    assert_kv_for(kv, [1, 2, 3])


def test_match_shared_prefix_returns_common_length():
    cache = RadixKVCache(budget_tokens=100)
    cache.insert([1, 2, 3, 4, 5, 6], make_kv([1, 2, 3, 4, 5, 6]))
    n, kv = cache.match([1, 2, 3, 9, 9])
    assert n == 3
    assert_kv_for(kv, [1, 2, 3])
    assert match_length(cache, [1, 2, 3, 9, 9]) == 3
    assert cache.match([7, 1, 2]) == (0, [])


def test_partial_edge_match_inside_an_edge():
    cache = RadixKVCache(budget_tokens=100)
    cache.insert([10, 11, 12, 13, 14, 15, 16, 17], make_kv([10, 11, 12, 13, 14, 15, 16, 17]))
    for query, common in [([10], 1), ([10, 11, 12], 3), ([10, 11, 12, 13, 14, 15, 16], 7)]:
        n, kv = cache.match(query)
        assert n == common
        assert_kv_for(kv, query[:common])
    # matching does not change the tree
    assert cache.total_tokens == 8
    assert tree_tokens(cache) == 8


def test_match_across_several_edges_and_inside_the_last():
    cache = RadixKVCache(budget_tokens=100)
    a = [1, 2, 3, 4, 5, 6]
    b = [1, 2, 3, 7, 8, 9]
    c = [1, 2, 3, 7, 8, 10, 11, 12]
    for seq in (a, b, c):
        cache.insert(seq, make_kv(seq))
    # path: [1,2,3] -> [7,8] -> [10,11,12] (partially)
    n, kv = cache.match([1, 2, 3, 7, 8, 10, 11, 99])
    assert n == 7
    assert_kv_for(kv, [1, 2, 3, 7, 8, 10, 11])
    for seq in (a, b, c):
        n, kv = cache.match(seq)
        assert n == len(seq)
        assert_kv_for(kv, seq)


def test_insert_prefix_of_existing_splits_edge_without_adding_tokens():
    cache = RadixKVCache(budget_tokens=100)
    cache.insert([1, 2, 3, 4], make_kv([1, 2, 3, 4]))
    cache.insert([1, 2], make_kv([1, 2]))
    assert cache.total_tokens == 4
    assert tree_tokens(cache) == 4
    n, kv = cache.match([1, 2, 3, 4])
    assert n == 4
    assert_kv_for(kv, [1, 2, 3, 4])
    n, kv = cache.match([1, 2, 5])
    assert n == 2
    assert_kv_for(kv, [1, 2])


# --- sharing ----------------------------------------------------------------------------


def test_shared_prefix_stored_once():
    cache = RadixKVCache(budget_tokens=1000)
    seqs = [
        [1, 2, 3, 4, 5, 6],
        [1, 2, 3, 4, 7, 8, 9],
        [1, 2, 10],
        [20, 21],
        [1, 2, 3, 4, 5, 6],  # duplicate adds nothing
    ]
    for i, seq in enumerate(seqs, 1):
        cache.insert(seq, make_kv(seq))
        assert cache.total_tokens == distinct_prefixes(*seqs[:i])
        assert tree_tokens(cache) == cache.total_tokens
    assert cache.total_tokens == 6 + 3 + 1 + 2
    for seq in seqs:
        n, kv = cache.match(seq)
        assert n == len(seq)
        assert_kv_for(kv, seq)


# --- eviction ---------------------------------------------------------------------------


def test_lru_evicts_least_recently_used_leaf():
    cache = RadixKVCache(budget_tokens=10)
    a, b, c = [1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]
    cache.insert(a, make_kv(a))
    cache.insert(b, make_kv(b))
    assert cache.match(a)[0] == 4  # a is now more recent than b
    cache.insert(c, make_kv(c))
    assert cache.total_tokens == 8
    assert match_length(cache, b) == 0  # b evicted
    assert match_length(cache, a) == 4
    assert match_length(cache, c) == 4


def test_lru_without_touch_evicts_oldest():
    cache = RadixKVCache(budget_tokens=10)
    a, b, c = [1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]
    for seq in (a, b, c):
        cache.insert(seq, make_kv(seq))
    assert match_length(cache, a) == 0
    assert match_length(cache, b) == 4
    assert match_length(cache, c) == 4


def test_partial_match_touches_the_matched_path():
    cache = RadixKVCache(budget_tokens=10)
    a, b, c = [1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]
    cache.insert(a, make_kv(a))
    cache.insert(b, make_kv(b))
    assert cache.match([1, 2, 99])[0] == 2  # partial match inside a's edge
    cache.insert(c, make_kv(c))
    assert match_length(cache, a) == 4
    assert match_length(cache, b) == 0


def test_eviction_removes_leaves_before_shared_parents():
    cache = RadixKVCache(budget_tokens=9)
    shared = [1, 2, 3]
    x, y = shared + [4, 5], shared + [6, 7]
    cache.insert(x, make_kv(x))
    cache.insert(y, make_kv(y))  # tree: [1,2,3] -> [4,5] | [6,7]  (7 tokens)
    z = [8, 9, 10]
    cache.insert(z, make_kv(z))  # 10 > 9: the LRU leaf [4,5] goes, the shared prefix stays
    assert cache.total_tokens == 8
    assert match_length(cache, x) == 3
    assert match_length(cache, y) == 5
    assert match_length(cache, z) == 3
    n, kv = cache.match(x)
    assert n == 3
    assert_kv_for(kv, shared)


@pytest.mark.parametrize("budget", [8, 16, 25])
def test_total_tokens_never_exceeds_budget(budget):
    cache = RadixKVCache(budget_tokens=budget)
    gen = torch.Generator().manual_seed(budget)
    for _ in range(60):
        length = int(torch.randint(1, 12, (1,), generator=gen))
        seq = torch.randint(0, 4, (length,), generator=gen).tolist()
        cache.insert(seq, make_kv(seq))
        assert cache.total_tokens <= budget
        assert tree_tokens(cache) == cache.total_tokens
        n, kv = cache.match(seq)
        assert match_length(cache, seq) == n
        if n:
            assert_kv_for(kv, seq[:n])


def test_sequence_longer_than_budget_is_not_kept():
    cache = RadixKVCache(budget_tokens=5)
    seq = list(range(8))
    cache.insert(seq, make_kv(seq))
    assert cache.total_tokens == 0
    assert cache.match(seq) == (0, [])


def test_evict_with_explicit_budget_returns_tokens_freed():
    cache = RadixKVCache(budget_tokens=100)
    cache.insert([1, 2, 3], make_kv([1, 2, 3]))
    cache.insert([4, 5], make_kv([4, 5]))
    assert cache.evict(3) == 3  # the older [1,2,3] goes
    assert cache.total_tokens == 2
    assert match_length(cache, [4, 5]) == 2
    assert cache.evict(0) == 2
    assert cache.total_tokens == 0
    assert cache.evict(0) == 0


# --- helpers and lifecycle --------------------------------------------------------------


def test_match_length_agrees_with_match():
    cache = RadixKVCache(budget_tokens=1000)
    for seq in ([1, 2, 3, 4, 5], [1, 2, 6, 7], [8, 9], [1, 2, 6, 10, 11, 12]):
        cache.insert(seq, make_kv(seq))
    queries = [
        [],
        [1],
        [1, 2],
        [1, 2, 3],
        [1, 2, 3, 4, 5, 6],
        [1, 2, 6, 10, 11],
        [1, 2, 6, 10, 99],
        [8, 9, 10],
        [9],
        [1, 3],
    ]
    for q in queries:
        assert match_length(cache, q) == cache.match(q)[0], q


def test_clear_empties_the_cache():
    cache = RadixKVCache(budget_tokens=100)
    cache.insert([1, 2, 3], make_kv([1, 2, 3]))
    cache.insert([4, 5], make_kv([4, 5]))
    cache.clear()
    assert cache.total_tokens == 0
    assert cache.root.children == {}
    assert cache.match([1, 2, 3]) == (0, [])
    assert match_length(cache, [4, 5]) == 0
    cache.insert([1, 2], make_kv([1, 2]))  # usable again after clear
    assert cache.match([1, 2])[0] == 2


def test_matched_tensors_survive_eviction_and_are_copies():
    cache = RadixKVCache(budget_tokens=6)
    a = [1, 2, 3, 4]
    cache.insert(a, make_kv(a))
    n_full, kv_full = cache.match(a)
    n_part, kv_part = cache.match([1, 2, 99])
    assert (n_full, n_part) == (4, 2)
    cache.insert([7, 8, 9, 10], make_kv([7, 8, 9, 10]))  # evicts a
    assert match_length(cache, a) == 0
    assert_kv_for(kv_full, a)
    assert_kv_for(kv_part, [1, 2])
    # writing into a returned tensor does not corrupt the cache
    cache.insert(a, make_kv(a))  # evicts [7..10]
    _, kv = cache.match(a)
    kv[0][0].zero_()
    _, again = cache.match(a)
    assert_kv_for(again, a)


def test_cache_does_not_alias_the_inserted_tensors():
    cache = RadixKVCache(budget_tokens=100)
    kv = make_kv([1, 2, 3])
    cache.insert([1, 2, 3], kv)
    for k, v in kv:
        k.fill_(0)
        v.fill_(0)
    _, got = cache.match([1, 2, 3])
    assert_kv_for(got, [1, 2, 3])


# --- views instead of copies ------------------------------------------------------------


def _storages(kv) -> set[int]:
    return {t.untyped_storage().data_ptr() for pair in kv for t in pair}


def test_match_pieces_are_views_of_the_path_and_load_into_a_pool_row():
    from engine.embedded.kv_pool import KVPool

    cache = RadixKVCache(budget_tokens=1000)
    a, b = [1, 2, 3, 4], [1, 2, 3, 4, 5, 6]
    cache.insert(a, make_kv(a))
    cache.insert(b, make_kv(b))  # an edge [1..4] and a child [5, 6]
    n, pieces = cache.match_pieces([1, 2, 3, 4, 5, 9])
    assert n == 5 and [p[0][0].shape[2] for p in pieces] == [4, 1]
    edges = cache.root.children[1].kv + cache.root.children[1].children[5].kv
    assert _storages([kv for piece in pieces for kv in piece]) <= _storages(edges)  # no copy
    pool = KVPool(layers=LAYERS, slots=2, kv_heads=HEADS, head_dim=DIM, dtype=torch.float32)
    pool.load_pieces(1, pieces)
    assert pool.lengths[1] == 5
    assert_kv_for(pool.row(1), [1, 2, 3, 4, 5])
    assert cache.match_pieces([9]) == (0, [])


def test_a_split_near_the_end_keeps_the_long_side_as_a_view_and_copies_the_short_one():
    cache = RadixKVCache(budget_tokens=1000)
    long = list(range(1, 17))  # 16 tokens, one edge
    cache.insert(long, make_kv(long))
    stored = _storages(cache.root.children[1].kv)
    branch = long[:15] + [99]
    cache.insert(branch, make_kv(branch))  # splits the edge after 15 of its 16 tokens
    upper = cache.root.children[1]
    lower = upper.children[16]
    assert len(upper.tokens) == 15 and _storages(upper.kv) == stored  # 15/16 >= 7/8: a view
    assert not _storages(lower.kv) & stored  # the one-token side is its own copy
    assert_kv_for(cache.match(long)[1], long)
    assert_kv_for(cache.match(branch)[1], branch)
    assert tree_tokens(cache) == cache.total_tokens == 17


def test_a_split_in_the_middle_copies_both_sides():
    cache = RadixKVCache(budget_tokens=1000)
    long = list(range(1, 17))
    cache.insert(long, make_kv(long))
    stored = _storages(cache.root.children[1].kv)
    branch = long[:8] + [99]
    cache.insert(branch, make_kv(branch))
    upper = cache.root.children[1]
    assert not _storages(upper.kv) & stored
    assert not _storages(upper.children[9].kv) & stored
    assert_kv_for(cache.match(long)[1], long)
    assert_kv_for(cache.match(branch)[1], branch)
