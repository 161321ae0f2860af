"""The browser sign-in: the HTML page (``page``) and its routes, session cookie and the
redirect of signed-out page requests (``routes``)."""
