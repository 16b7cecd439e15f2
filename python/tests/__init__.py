"""Tests of the orbitkv Python client (unittest; run with
`/usr/bin/python3 -m unittest discover -s python/tests -t python` from the
repository root, or `make test-python`)."""
