"""The SGLang backend: hardware facts, launch tuning, systemd units, the gateway and the client.

Nothing here imports SGLang itself; the server runs as its own process (``sglang.launch_server``).
"""
