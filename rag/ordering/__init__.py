"""Ordering retrieved chunks for prefix-cache reuse (see ``ContextOrdering``)."""

from rag.ordering.base import ContextOrdering, OrderingError, default_ordering

__all__ = ["ContextOrdering", "OrderingError", "default_ordering"]
