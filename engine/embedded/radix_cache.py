"""A token-level radix tree of KV tensors with LRU eviction under a token budget.

Each edge holds a run of token ids and, per layer, the key/value tensors for exactly those
tokens (shape ``[1, kv_heads, len, head_dim]``). Shared prefixes are stored once. ``match``
returns how many leading tokens of a sequence are cached, plus their KV concatenated along the
path; ``insert`` adds a sequence's KV; eviction removes least-recently-used leaves.

Invariants: every non-root node has a non-empty edge; a node's KV length equals its edge length;
``total_tokens`` is the sum of edge lengths over the tree. Tensors handed out by ``match`` are
fresh copies, so callers may keep using them after eviction; ``match_pieces`` hands out views,
valid until the cache next changes.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

LayerKV = tuple[torch.Tensor, torch.Tensor]


@dataclass(eq=False)
class _Node:
    tokens: tuple[int, ...]
    kv: list[LayerKV]
    parent: _Node | None
    children: dict[int, _Node] = field(default_factory=dict)
    last_used: int = 0


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _slice(kv: list[LayerKV], start: int, stop: int | None = None) -> list[LayerKV]:
    # clone so that a slice never pins the storage of the tensor it came from
    return [(k[:, :, start:stop].clone(), v[:, :, start:stop].clone()) for k, v in kv]


# a split keeps a side as a view of the edge's storage when it covers at least this share of
# it, and clones it otherwise: the memory under the tree then exceeds what ``total_tokens``
# counts by at most 1/7, and splitting a long edge near its end (a new question after the same
# documents) copies only the short side instead of the whole prefix (35 MB of KV for 1,500
# tokens of the default model: 35-45 ms of fresh memory on 2 cores)
VIEW_SHARE = 7 / 8


def _part(kv: list[LayerKV], start: int, stop: int | None = None) -> list[LayerKV]:
    """Positions ``start .. stop`` of an edge's KV: views if they cover ``VIEW_SHARE`` of the
    storage under them, else fresh copies (``_slice``)."""
    if not kv:
        return []
    k = kv[0][0]
    view = k[:, :, start:stop]
    if view.numel() * view.element_size() >= VIEW_SHARE * k.untyped_storage().nbytes():
        return [(k[:, :, start:stop], v[:, :, start:stop]) for k, v in kv]
    return _slice(kv, start, stop)


class RadixKVCache:
    """Not thread-safe: the engine's scheduler thread is its only user."""

    def __init__(self, budget_tokens: int) -> None:
        self.budget_tokens = budget_tokens
        self.root = _Node(tokens=(), kv=[], parent=None)
        self.total_tokens = 0
        self._clock = itertools.count(1)

    def _touch(self, node: _Node) -> None:
        stamp = next(self._clock)
        while node is not None:
            node.last_used = stamp
            node = node.parent

    def match(self, ids: Sequence[int]) -> tuple[int, list[LayerKV]]:
        """Longest cached prefix of ``ids``: (length, per-layer KV for those tokens), fresh
        copies concatenated along the path."""
        pos, pieces = self.match_pieces(ids)
        if pos == 0:
            return 0, []
        layers = len(pieces[0])
        kv = [
            (
                torch.cat([p[i][0] for p in pieces], dim=2),
                torch.cat([p[i][1] for p in pieces], dim=2),
            )
            for i in range(layers)
        ]
        return pos, kv

    def match_pieces(self, ids: Sequence[int]) -> tuple[int, list[list[LayerKV]]]:
        """Longest cached prefix of ``ids``: (length, the path's edges' per-layer KV in order).
        The pieces are views of the cache's own tensors, valid until the cache next changes
        (``insert``, ``evict``, ``clear``): copy them out before that (``KVPool.load_pieces``).
        Saves ``match``'s concatenated copy (for a 1,500-token prefix of the default model,
        35 MB of fresh memory: 40-58 ms of a 0.1 s warm TTFT on 2 cores)."""
        node, pos = self.root, 0
        pieces: list[list[LayerKV]] = []
        last = self.root
        while pos < len(ids):
            child = node.children.get(ids[pos])
            if child is None:
                break
            n = common_prefix_len(child.tokens, ids[pos:])
            if n < len(child.tokens):
                pieces.append([(k[:, :, :n], v[:, :, :n]) for k, v in child.kv])
                pos += n
                last = child
                break
            pieces.append(child.kv)
            pos += n
            node = last = child
        if pos == 0:
            return 0, []
        self._touch(last)
        return pos, pieces

    def insert(self, ids: Sequence[int], kv: list[LayerKV]) -> None:
        """Store KV for ``ids`` (``kv`` covers at least ``len(ids)`` positions), then evict."""
        node, pos = self.root, 0
        ids = tuple(ids)
        while pos < len(ids):
            child = node.children.get(ids[pos])
            if child is None:
                leaf = _Node(tokens=ids[pos:], kv=_slice(kv, pos, len(ids)), parent=node)
                node.children[ids[pos]] = leaf
                self.total_tokens += len(leaf.tokens)
                node = leaf
                pos = len(ids)
                break
            n = common_prefix_len(child.tokens, ids[pos:])
            if n < len(child.tokens):
                child = self._split(child, n)
            node = child
            pos += n
        self._touch(node)
        self.evict()

    def _split(self, node: _Node, at: int) -> _Node:
        """Split ``node``'s edge after ``at`` tokens; return the new upper node."""
        parent = node.parent
        assert parent is not None and 0 < at < len(node.tokens)
        upper = _Node(
            tokens=node.tokens[:at],
            kv=_part(node.kv, 0, at),
            parent=parent,
            last_used=node.last_used,
        )
        node.tokens = node.tokens[at:]
        node.kv = _part(node.kv, at)
        node.parent = upper
        upper.children[node.tokens[0]] = node
        parent.children[upper.tokens[0]] = upper
        return upper

    def _leaves(self) -> list[_Node]:
        out, stack = [], [self.root]
        while stack:
            node = stack.pop()
            if node.children:
                stack.extend(node.children.values())
            elif node is not self.root:
                out.append(node)
        return out

    def evict(self, budget: int | None = None) -> int:
        """Drop LRU leaves until the tree fits ``budget`` tokens; return tokens freed."""
        budget = self.budget_tokens if budget is None else budget
        freed = 0
        while self.total_tokens > budget:
            leaves = self._leaves()
            if not leaves:
                break
            victim = min(leaves, key=lambda n: n.last_used)
            assert victim.parent is not None
            del victim.parent.children[victim.tokens[0]]
            self.total_tokens -= len(victim.tokens)
            freed += len(victim.tokens)
        return freed

    def clear(self) -> None:
        self.root = _Node(tokens=(), kv=[], parent=None)
        self.total_tokens = 0


def match_length(cache: RadixKVCache, ids: Sequence[int]) -> int:
    """How many leading tokens of ``ids`` are cached, without copying any tensor."""
    node, pos = cache.root, 0
    while pos < len(ids):
        child = node.children.get(ids[pos])
        if child is None:
            break
        n = common_prefix_len(child.tokens, ids[pos:])
        pos += n
        if n < len(child.tokens):
            break
        node = child
    return pos
