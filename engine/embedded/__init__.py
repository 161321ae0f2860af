"""The embedded CPU engine: a real small instruct model with prefix-KV reuse, in-process."""
