"""The graded functions' own tests (`<name>/test_<name>.py`) share the test suite's fixtures and its
one torch thread per process (tests/conftest.py)."""

from tests.conftest import no_server_outlives_its_test, tok  # noqa: F401 - fixtures, found by name
