"""The live processes the tests and the bench both start: Relay's own servers and workers, and
the far ends they talk to. Not an app (nothing here is in INSTALLED_APPS) and no part of the
product: the product never imports it. It imports no test module and no pytest, so that bench/
(run outside pytest) and the suite share one implementation; the pytest fixtures that start
these processes for a test stay in the tests' conftest files.
"""
