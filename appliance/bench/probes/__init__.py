"""``appliance bench probes``: hostile and malformed requests against a running appliance."""
