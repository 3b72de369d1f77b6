"""The emulator's fault switches, flipped while it serves, seen by a plain HTTP client."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator

import pytest
from dispatch_kubeflow_testing.emulator import TOKEN, Emulator

PATH = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs"


def ask(emu: Emulator, timeout: float = 10.0) -> tuple[int, dict[str, str], dict[str, object]]:
    conn = http.client.HTTPConnection(emu.host, emu.port, timeout=timeout)
    try:
        conn.request("GET", PATH, headers={"Authorization": f"Bearer {TOKEN}"})
        answer = conn.getresponse()
        return answer.status, dict(answer.getheaders()), json.loads(answer.read())
    finally:
        conn.close()


@pytest.fixture
def emu() -> Iterator[Emulator]:
    emulator = Emulator().start()
    yield emulator
    emulator.stop()


@pytest.mark.parametrize(
    ("kind", "code", "retry_after"), [("500", 500, None), ("429", 429, "7"), ("503", 503, "7")]
)
def test_an_error_switch_answers_every_request_until_it_is_off(
    emu: Emulator, kind: str, code: int, retry_after: str | None
) -> None:
    emu.misbehave(kind, retry_after=7)
    for _ in range(3):
        status, headers, body = ask(emu)
        assert (status, headers.get("Retry-After"), body["code"]) == (code, retry_after, code)
        assert body["kind"] == "Status" and body["message"]
    assert emu.faults.answered == 3
    emu.behave()
    assert ask(emu)[0] == 200


def test_hang_accepts_and_never_answers_until_it_is_off(emu: Emulator) -> None:
    emu.misbehave("hang")
    with pytest.raises(TimeoutError):
        ask(emu, timeout=0.5)
    assert emu.faults.held == 1
    emu.behave()
    assert ask(emu)[0] == 200


def test_refuse_stops_listening_and_comes_back_on_the_same_port(emu: Emulator) -> None:
    port = emu.port
    emu.misbehave("refuse")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((emu.host, port), timeout=5).close()
    emu.behave()
    assert emu.port == port and ask(emu)[0] == 200


def test_one_switch_replaces_another(emu: Emulator) -> None:
    emu.misbehave("hang")
    emu.misbehave("500")
    assert ask(emu)[0] == 500
    emu.misbehave("refuse")
    emu.misbehave("429", retry_after=1)
    assert ask(emu)[1]["Retry-After"] == "1"


def test_an_unknown_misbehaviour_is_refused(emu: Emulator) -> None:
    with pytest.raises(ValueError, match="no such misbehaviour"):
        emu.misbehave("melt")
