"""Helpers shared by the test packages: repository paths, loopback servers, small appliances
and generated office files. (Fixtures live in the ``conftest.py`` files.)"""
