"""The engine contract and its backends (embedded CPU engine; SGLang client for GPU boxes)."""
