"""Retrieval: parsing, chunking, embeddings, the FAISS index, retrieval and prompt assembly."""
