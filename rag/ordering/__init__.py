"""Ordering retrieved chunks for prefix-cache reuse (see ``ContextOrdering``)."""

from rag.ordering.base import ContextOrdering, OrderingError, default_ordering, riders_in

__all__ = ["ContextOrdering", "OrderingError", "default_ordering", "riders_in"]
