"""``appliance bench ordering``: a synthetic multi-session workload (``workload``) replayed
through a token-level radix LRU (``radix``, ``replay``, ``sim``) and through the real engine
(``engine``), with the table in ``bench``."""
