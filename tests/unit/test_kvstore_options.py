"""The kvstore server's options from a configuration (kvstore/options.py): with [security] on it
takes a producer's status only for a thread of [[receivers]] (kvstore/SPEC.md, "Security"), so
it is given the receivers' threads and refuses to run without them."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sectorflow.kvstore import KvstoreError, Server, server_options


def test_the_server_is_given_each_receivers_producer_threads(make_config: Callable) -> None:
    config, _ = make_config(receivers=[{"threads": threads} for threads in (1, 2, 4, 3)])
    assert server_options(config).producer_threads == [1, 2, 4, 3]


def test_a_secured_server_without_the_receivers_threads_is_refused_naming_them(make_config: Callable) -> None:
    config, _ = make_config()
    options = server_options(config)
    options.curve.public_key, options.curve.secret_key = "p" * 40, "s" * 40  # checked before any key is used
    options.producer_threads = []
    with pytest.raises(KvstoreError, match=r"\[security\] on with no receivers' threads \(producer_threads\)"):
        Server(options)
