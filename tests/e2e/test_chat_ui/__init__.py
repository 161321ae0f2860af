"""The staff chat page in headless Chromium (conftest.py starts the processes and the browser).

A package, not a module, so that its fixtures can be package-scoped: the tests of its files run
in file order (test_answers, test_conversations, test_safeguards) against one server pair, one
browser and one signed-in admin page, and build on each other.
"""
