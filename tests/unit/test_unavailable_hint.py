"""The Python client's UnavailableError says how to start a server when none answered, and only
then; its attributes stay what the call answered."""

from __future__ import annotations

import grpc
import pytest
from celestial_client import CelestialClient, UnavailableError
from celestial_client.errors import NOT_ANSWERING_HINT, TLS_EXPECTED_HINT


def test_no_server_at_the_target_says_how_to_start_one() -> None:
    with CelestialClient("127.0.0.1:1", retry=None) as client, \
            pytest.raises(UnavailableError) as caught:
        client.stats()
    err = caught.value
    assert "make run" in str(err) and "celestial serve" in str(err)
    assert str(err) == f"{err.details} ({NOT_ANSWERING_HINT})"
    assert NOT_ANSWERING_HINT not in err.details  # what gRPC said, as it said it
    assert err.code == grpc.StatusCode.UNAVAILABLE and err.reason is None


def test_a_server_that_answered_gets_no_start_hint() -> None:
    down = UnavailableError("the model is unavailable", reason="MODEL_UNAVAILABLE")
    assert str(down) == "the model is unavailable"
    tls = UnavailableError(f"Socket closed ({TLS_EXPECTED_HINT})")
    assert str(tls) == tls.details  # a server is there; it speaks TLS
