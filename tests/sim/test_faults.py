"""Injected faults through the SDK: retried where the SDK retries, visible where it does not."""

from __future__ import annotations

import threading
import time

import anthropic
import httpx2
import pytest

from speculate.sim import FaultConfig, SimServer

from .conftest import MODEL

HI = [{"role": "user", "content": "hi"}]


def test_rate_limit_carries_scaled_retry_after_and_the_sdk_retries() -> None:
    faults = FaultConfig(rate_limit_rate=0.3, retry_after_s=2.0)
    with SimServer([], seed=1, time_scale=0.001, faults=faults) as sim:
        with anthropic.Anthropic(base_url=sim.base_url, api_key="k", max_retries=0) as bare:
            errors = []
            for _ in range(10):
                try:
                    bare.messages.create(model=MODEL, max_tokens=500, messages=HI)
                except anthropic.RateLimitError as exc:
                    errors.append(exc)
            assert errors, "seed 1 at rate 0.3 draws some 429s in ten requests"
            assert errors[0].response.headers["retry-after"] == "0.002"
            assert errors[0].body["error"]["type"] == "rate_limit_error"  # type: ignore[index]
        with anthropic.Anthropic(base_url=sim.base_url, api_key="k", max_retries=10) as client:
            for _ in range(10):
                assert client.messages.create(model=MODEL, max_tokens=500, messages=HI).content
        assert sim.statistics().faults["rate_limit"] > len(errors)


def test_overloaded_529_is_retried_by_the_sdk() -> None:
    with SimServer([], seed=4, time_scale=0.001, faults=FaultConfig(overloaded_rate=0.3)) as sim:
        with anthropic.Anthropic(base_url=sim.base_url, api_key="k", max_retries=0) as bare:
            outcomes = []
            for _ in range(8):
                try:
                    bare.messages.create(model=MODEL, max_tokens=500, messages=HI)
                    outcomes.append("ok")
                except anthropic.APIStatusError as exc:
                    assert exc.status_code == 529 and exc.body["error"]["type"] == "overloaded_error"  # type: ignore[index]
                    outcomes.append("529")
            assert "529" in outcomes and "ok" in outcomes
    # Seed 1 at rate 0.5: the first draw fails, the second succeeds (the SDK backs off ~0.5 s: 529 has no
    # retry-after).
    with SimServer([], seed=1, time_scale=0.001, faults=FaultConfig(overloaded_rate=0.5)) as sim:
        with anthropic.Anthropic(base_url=sim.base_url, api_key="k", max_retries=2) as client:
            assert client.messages.create(model=MODEL, max_tokens=500, messages=HI).content
        assert sim.statistics().faults["overloaded"] == 1
        assert sim.statistics().engine.requests == 1


def test_dropped_connection_is_retried_and_mid_stream_drop_surfaces() -> None:
    with SimServer([], seed=3, time_scale=0.001, faults=FaultConfig(drop_rate=0.3)) as sim:
        with anthropic.Anthropic(base_url=sim.base_url, api_key="k", max_retries=6) as client:
            for _ in range(4):
                assert (
                    client.messages.create(model=MODEL, max_tokens=500, messages=HI).stop_reason == "end_turn"
                )
        assert sim.statistics().faults["drop"] >= 1
    with SimServer([], time_scale=0.001, faults=FaultConfig(drop_rate=1.0)) as sim:
        with anthropic.Anthropic(base_url=sim.base_url, api_key="k", max_retries=0) as client:
            with pytest.raises(anthropic.APIConnectionError):
                client.messages.create(model=MODEL, max_tokens=500, messages=HI)
            seen = []
            with (
                pytest.raises(httpx2.RemoteProtocolError),
                client.messages.stream(model=MODEL, max_tokens=5000, messages=HI) as stream,
            ):
                for event in stream:
                    seen.append(event.type)
            assert seen[0] == "message_start" and "message_stop" not in seen


def test_stalled_stream_times_out_and_close_cuts_it() -> None:
    faults = FaultConfig(stall_rate=1.0, stall_s=100_000.0)  # 100 s of wall time at this scale
    sim = SimServer([], time_scale=0.001, faults=faults).start()
    try:
        with anthropic.Anthropic(base_url=sim.base_url, api_key="k", max_retries=0, timeout=0.3) as client:
            seen = []
            with (
                pytest.raises(httpx2.ReadTimeout),
                client.messages.stream(model=MODEL, max_tokens=5000, messages=HI) as stream,
            ):
                for event in stream:
                    seen.append(event.type)
            assert seen and "message_stop" not in seen
            with pytest.raises(anthropic.APITimeoutError):
                client.messages.create(model=MODEL, max_tokens=500, messages=HI)
        # A client still waiting on a stall when the server stops gets cut off, not left hanging.
        with anthropic.Anthropic(base_url=sim.base_url, api_key="k", max_retries=0, timeout=60) as client:
            failure: list[BaseException] = []

            def waiting() -> None:
                try:
                    client.messages.create(model=MODEL, max_tokens=500, messages=HI)
                except anthropic.APIConnectionError as exc:
                    failure.append(exc)

            waiter = threading.Thread(target=waiting)
            waiter.start()
            time.sleep(0.2)
            began = time.monotonic()
            sim.close()
            waiter.join(5)
            assert not waiter.is_alive() and failure
            assert time.monotonic() - began < 2
    finally:
        sim.close()


def test_fault_config_rejects_bad_rates() -> None:
    with pytest.raises(ValueError, match="sum to at most 1"):
        FaultConfig(overloaded_rate=0.7, drop_rate=0.5)
