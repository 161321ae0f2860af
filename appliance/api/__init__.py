"""The HTTP edge: the JSON/SSE chat API (``chat``), the admin REST API (``admin``), the
OpenAI-compatible RAG ``/v1`` (``openai_rag``), their bearer-token dependency and error map."""
