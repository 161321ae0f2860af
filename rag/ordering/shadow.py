"""A shadow of an engine's prefix cache, at the granularity of prompt segments (pure).

The engine's radix cache holds token sequences; the shadow holds the *segment* sequences that
were sent (the system prompt and earlier messages as stable string keys, then chunk ids as
ints), each node weighted by its token count and stamped with its last use. It mirrors the
engine's policy: a sent path is cached whole, and least-recently-used leaves are dropped while
the total exceeds the capacity.

It is kept in step with the engine in two ways:
- capacity: ``record`` evicts LRU leaves to the capacity, like the engine does;
- reports: ``sync`` compares the tokens the engine said it reused for a request with what the
  shadow predicted. A shortfall means the engine evicted a node the shadow still holds; under
  LRU everything not used since that node's last use is gone too, so the shadow drops it all
  and lowers its capacity estimate to what survives. A shortfall inside the first segment
  (the system prompt, which every request shares and LRU drops last) corrects its weight.

Invariants: a node's ``last_used`` is at least that of any descendant (a touch stamps the whole
path); ``total_tokens`` is the sum of node weights; the root has no key and weight 0.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

Key = Hashable  # a prefix segment key (str), a chunk id (int), or a request's tail marker


@dataclass(eq=False)
class ShadowNode:
    key: Key | None
    tokens: int
    parent: ShadowNode | None
    children: dict[Key, ShadowNode] = field(default_factory=dict)
    last_used: int = 0


class ShadowTrie:
    """Not thread-safe: the ordering facade serialises access."""

    def __init__(self, capacity_tokens: int, min_capacity_tokens: int = 256) -> None:
        if capacity_tokens < 1:
            raise ValueError("capacity_tokens must be positive")
        self.configured_capacity = capacity_tokens
        self.capacity = capacity_tokens
        self.min_capacity = min(min_capacity_tokens, capacity_tokens)
        self.root = ShadowNode(key=None, tokens=0, parent=None)
        self.total_tokens = 0
        self._clock = itertools.count(1)
        self._leaves: set[ShadowNode] = set()

    # ---- reading ----------------------------------------------------------------------------

    def walk(self, path: Sequence[Key]) -> list[ShadowNode]:
        """The nodes of the longest held prefix of ``path`` (no touch)."""
        node, out = self.root, []
        for key in path:
            child = node.children.get(key)
            if child is None:
                break
            out.append(child)
            node = child
        return out

    def find(self, path: Sequence[Key]) -> ShadowNode | None:
        """The node at the end of ``path`` when the whole path is held, else None."""
        nodes = self.walk(path)
        if len(nodes) != len(path):
            return None
        return nodes[-1] if nodes else self.root

    def predicted_cached(self, path: Sequence[Key]) -> int:
        """Tokens of the longest held prefix of ``path``."""
        return sum(n.tokens for n in self.walk(path))

    def longest_path(
        self,
        start: ShadowNode,
        allowed: set[Key],
        optional: set[Key] | frozenset[Key] = frozenset(),
        max_optional: int = 0,
    ) -> list[Key]:
        """The held path below ``start`` through keys of ``allowed`` (each at most once) with the
        most tokens; ties go to the most recently used.

        ``optional`` keys (disjoint from ``allowed``) may also lie on the path, at most
        ``max_optional`` of them: the path then has the most ``allowed`` tokens, then the most
        ``optional`` tokens, then the most recent use."""
        best: tuple[int, int, int, list[Key]] = (0, 0, 0, [])

        def dfs(node: ShadowNode, weight: int, extra: int, riders: int, keys: list[Key]) -> None:
            nonlocal best
            if keys and (weight, extra, node.last_used) > best[:3]:
                best = (weight, extra, node.last_used, list(keys))
            for key, child in node.children.items():
                if key in keys:
                    continue
                if key in allowed:
                    keys.append(key)
                    dfs(child, weight + child.tokens, extra, riders, keys)
                    keys.pop()
                elif key in optional and riders < max_optional:
                    keys.append(key)
                    dfs(child, weight, extra + child.tokens, riders + 1, keys)
                    keys.pop()

        dfs(start, 0, 0, 0, [])
        return best[3]

    # ---- writing ----------------------------------------------------------------------------

    def record(self, path: Sequence[Key], weights: Sequence[int]) -> None:
        """``path`` was sent (and is now cached whole): insert what is missing with ``weights``
        (one per key; existing nodes keep theirs), touch the path, then evict to capacity."""
        if len(path) != len(weights):
            raise ValueError("one weight per key")
        node = self.root
        for key, weight in zip(path, weights, strict=True):
            child = node.children.get(key)
            if child is None:
                child = ShadowNode(key=key, tokens=max(0, int(weight)), parent=node)
                node.children[key] = child
                self._leaves.discard(node)
                self._leaves.add(child)
                self.total_tokens += child.tokens
            node = child
        stamp = next(self._clock)
        while node is not None:
            node.last_used = stamp
            node = node.parent
        self.evict()

    def evict(self) -> int:
        """Drop LRU leaves until the total fits the capacity; return the tokens freed (the
        just-recorded path has the newest stamp, so it goes last, as in the engine)."""
        freed = 0
        while self.total_tokens > self.capacity and self._leaves:
            freed += self._drop(min(self._leaves, key=lambda n: n.last_used))
        return freed

    def sync(
        self,
        path: Sequence[Key],
        cached_tokens: int,
        slack: int = 32,
        page_tokens: int = 1,
        local: Callable[[Key], bool] | None = None,
    ) -> bool:
        """Reconcile with the engine's report for a request that sent ``path`` (call before
        ``record``). Returns True when the shadow had to forget nodes the engine had evicted.

        ``page_tokens`` is the engine's cache granularity: it reuses a prefix in whole pages, so
        a report up to a page short of the held path (plus the usual slack for segment weights
        that are estimates) is not an eviction. A shortfall at a node
        whose key ``local`` accepts is that node's alone (the engine may never have held it as
        the shadow keyed it: a generated answer that re-tokenises differently), so only its
        subtree goes. A report inside the first segment (at least half of it) re-weights that
        segment to the report: LRU drops it last, so its estimated weight was off."""
        reach = 0
        for node in self.walk(path):
            reach += node.tokens
            if reach > cached_tokens + max(slack + page_tokens - 1, reach // 20):
                if node.parent is self.root and 2 * cached_tokens >= node.tokens:
                    # the first segment (the system prompt) is an ancestor of every request: LRU
                    # drops it last, so a report inside it means its weight (an estimate: the
                    # prompt less its chunks and an estimated tail) is off, not an eviction;
                    # what follows it on this path is gone. Forgetting the whole shadow over it
                    # (it did, at a one-token overestimate) also had a re-laid turn re-weight it
                    # from a worse estimate: predictions 15-35% off, and re-lays chosen wrongly
                    self.reweight(node, cached_tokens)
                    reach = cached_tokens
                    continue
                if local is not None and local(node.key):
                    self._drop_subtree(node)
                    return False
                # under LRU the engine dropped this node and every leaf used before it, but
                # not the nodes it matched: the ones above it on this path (touched when it
                # was, or later); forgetting those too (the shadow once did) left it empty at
                # every false alarm, with its capacity estimate at the floor for hundreds of
                # requests (seen at 128-token pages: 26% off on re-laid turns at 16k tokens)
                self._drop_subtree(node)
                self.forget_older_than(node.last_used - 1)
                # the engine could not keep what the shadow still held: lower the estimate,
                # never below what it has just shown it holds
                held = min(self.capacity, max(self.total_tokens, cached_tokens))
                self.capacity = max(self.min_capacity, held)
                return True
        # no shortfall: let a lowered estimate creep back towards the configured capacity
        self.capacity = min(self.configured_capacity, self.capacity + max(1, self.capacity // 64))
        return False

    def reweight(self, node: ShadowNode, tokens: int) -> None:
        """Set ``node``'s weight to ``tokens`` (a better measure than the one recorded)."""
        tokens = max(0, int(tokens))
        self.total_tokens += tokens - node.tokens
        node.tokens = tokens

    def forget_older_than(self, stamp: int) -> int:
        """Drop every node last used at or before ``stamp`` (whole subtrees); tokens freed."""
        freed = 0
        stack = [self.root]
        while stack:
            node = stack.pop()
            for child in list(node.children.values()):
                if child.last_used <= stamp:
                    freed += self._drop_subtree(child)
                else:
                    stack.append(child)
        return freed

    def clear(self) -> None:
        self.root = ShadowNode(key=None, tokens=0, parent=None)
        self.total_tokens = 0
        self._leaves.clear()
        self.capacity = self.configured_capacity

    # ---- internals --------------------------------------------------------------------------

    def _drop(self, leaf: ShadowNode) -> int:
        parent = leaf.parent
        assert parent is not None and not leaf.children
        del parent.children[leaf.key]
        self._leaves.discard(leaf)
        self.total_tokens -= leaf.tokens
        if parent is not self.root and not parent.children:
            self._leaves.add(parent)
        return leaf.tokens

    def _drop_subtree(self, node: ShadowNode) -> int:
        freed = 0
        stack = [node]
        while stack:
            n = stack.pop()
            stack.extend(n.children.values())
            self._leaves.discard(n)
            self.total_tokens -= n.tokens
            freed += n.tokens
        parent = node.parent
        assert parent is not None
        del parent.children[node.key]
        if parent is not self.root and not parent.children:
            self._leaves.add(parent)
        return freed
