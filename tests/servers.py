"""Test helpers: free loopback ports, and an ASGI app served by uvicorn in a thread."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serving(app) -> Iterator[str]:  # noqa: ANN001
    """Run ``app`` with uvicorn in a thread; stop it cleanly afterwards."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=5
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        assert not thread.is_alive(), "the test server did not stop"


def wait_idle(engine, timeout: float = 20.0) -> dict[str, float]:  # noqa: ANN001
    """Wait until ``engine`` runs and queues nothing; return its metrics then."""
    deadline = time.monotonic() + timeout
    while True:
        m = engine.metrics()
        if m["num_running_reqs"] == 0 and m["num_queue_reqs"] == 0:
            return m
        assert time.monotonic() < deadline, f"the engine did not go idle: {m}"
        time.sleep(0.05)
