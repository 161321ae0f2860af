"""A token-level radix-tree LRU cache without tensors: the benchmark's model of an engine cache.

It follows the embedded engine's ``RadixKVCache`` policy exactly (match touches the matched
path; insert stores the whole sequence, touches it, then drops least-recently-used leaves while
over budget) and SGLang's radix cache with page size 1; ``tests/test_ordering_shadow.py`` checks
it against ``RadixKVCache`` itself. With ``page_tokens`` above 1 it models an engine that caches
whole pages only (SGLang's ``--page-size``, vLLM's blocks): a match and a stored sequence are cut
down to a multiple of the page. Leaves sit in a heap with lazy invalidation, so eviction
costs O(log n) instead of a tree walk.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(eq=False)
class _Node:
    tokens: tuple[int, ...]
    parent: _Node | None
    children: dict[int, _Node] = field(default_factory=dict)
    last_used: int = 0


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class RadixLRU:
    def __init__(self, budget_tokens: int, page_tokens: int = 1) -> None:
        if page_tokens < 1:
            raise ValueError("page_tokens must be positive")
        self.budget_tokens = budget_tokens
        self.page_tokens = page_tokens
        self.root = _Node(tokens=(), parent=None)
        self.total_tokens = 0
        self._clock = itertools.count(1)
        self._heap: list[tuple[int, int, _Node]] = []
        self._ids = itertools.count()

    def _touch(self, node: _Node) -> None:
        stamp = next(self._clock)
        leaf = node
        while node is not None:
            node.last_used = stamp
            node = node.parent
        if leaf is not self.root and not leaf.children:
            heapq.heappush(self._heap, (stamp, next(self._ids), leaf))

    def match(self, ids: Sequence[int]) -> int:
        """Tokens of the longest cached prefix of ``ids``, in whole pages (touches it, like the
        engine)."""
        node, pos, last = self.root, 0, self.root
        while pos < len(ids):
            child = node.children.get(ids[pos])
            if child is None:
                break
            n = _common(child.tokens, ids[pos : pos + len(child.tokens)])
            pos += n
            last = child
            if n < len(child.tokens):
                break
            node = child
        if pos:
            self._touch(last)
        return pos - pos % self.page_tokens

    def insert(self, ids: Sequence[int]) -> None:
        node, pos = self.root, 0
        ids = tuple(ids[: len(ids) - len(ids) % self.page_tokens])  # whole pages only
        if not ids:
            return
        while pos < len(ids):
            child = node.children.get(ids[pos])
            if child is None:
                leaf = _Node(tokens=ids[pos:], parent=node)
                node.children[ids[pos]] = leaf
                self.total_tokens += len(leaf.tokens)
                node = leaf
                break
            n = _common(child.tokens, ids[pos : pos + len(child.tokens)])
            if n < len(child.tokens):
                upper = _Node(tokens=child.tokens[:n], parent=node, last_used=child.last_used)
                child.tokens = child.tokens[n:]
                child.parent = upper
                upper.children[child.tokens[0]] = child
                node.children[upper.tokens[0]] = upper
                child = upper
            node = child
            pos += n
        self._touch(node)
        self.evict()

    def evict(self) -> None:
        while self.total_tokens > self.budget_tokens and self._heap:
            stamp, _, leaf = heapq.heappop(self._heap)
            parent = leaf.parent
            if (
                leaf.children
                or parent is None
                or stamp != leaf.last_used
                or parent.children.get(leaf.tokens[0]) is not leaf
            ):
                continue  # stale entry: touched since, no longer a leaf, or already gone
            del parent.children[leaf.tokens[0]]
            leaf.parent = None
            self.total_tokens -= len(leaf.tokens)
            if parent is not self.root and not parent.children:
                heapq.heappush(self._heap, (parent.last_used, next(self._ids), parent))
