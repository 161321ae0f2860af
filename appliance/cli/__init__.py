"""The ``appliance`` command (``main``) and its backup/restore group (``ops``)."""
