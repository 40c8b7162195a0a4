"""Key handling of the prompt-toolkit front end, in-process: pipe input, dummy output, a real prompt loop
running in a worker thread exactly as the REPL runs it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from speculate.repl.app import PromptFrontend, rest_of

RIGHT, TAB, ENTER = "\x1b[C", "\t", "\r"


def wait_for(cond: Callable[[], Any], what: str, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


class Driver:
    def __init__(self, fe: PromptFrontend, inp: Any, pool: ThreadPoolExecutor) -> None:
        self.fe, self.inp, self.pool = fe, inp, pool
        self.diverged = 0
        self.result: Future[str] | None = None

    @property
    def buf(self) -> Any:
        return self.fe.session.default_buffer

    def start(self) -> None:
        self.result = self.pool.submit(self.fe.prompt_blocking)
        wait_for(lambda: self.fe.session.app.is_running and self.fe.session.app.loop is not None, "prompt")

    def ghost(self) -> str | None:
        s = self.buf.suggestion
        return s.text if s is not None else None

    def keys(self, text: str, *, settle: Callable[[], Any]) -> None:
        self.inp.send_text(text)
        wait_for(settle, f"keys {text!r} to be handled")

    def finish(self) -> str:
        assert self.result is not None
        return self.result.result(timeout=5)


@pytest.fixture
def driver() -> Iterator[Driver]:
    with create_pipe_input() as inp, ThreadPoolExecutor(1) as pool:
        d: Driver
        fe = PromptFrontend(
            toolbar=lambda: "toolbar",
            on_diverge=lambda: setattr(d, "diverged", d.diverged + 1),
            input=inp,
            output=DummyOutput(),
        )
        d = Driver(fe, inp, pool)
        try:
            yield d
        finally:
            if d.result is not None and not d.result.done():
                fe.abort()
                with pytest.raises(EOFError):
                    d.result.result(timeout=5)


def test_rest_of() -> None:
    assert rest_of("fix it", "") == "fix it"
    assert rest_of("fix it", "fix") == " it"
    assert rest_of("fix it", "fix it") is None
    assert rest_of("fix it", "fox") is None
    assert rest_of(None, "") is None


def test_pushed_prediction_appears_in_empty_line(driver: Driver) -> None:
    driver.start()
    assert driver.ghost() is None
    driver.fe.push("run the tests")
    wait_for(lambda: driver.ghost() == "run the tests", "ghost text")


def test_prediction_pushed_before_prompt_starts_is_shown(driver: Driver) -> None:
    driver.fe.push("run the tests")
    driver.start()
    wait_for(lambda: driver.ghost() == "run the tests", "ghost text")


def test_typing_a_prefix_keeps_the_rest_and_tab_accepts(driver: Driver) -> None:
    driver.start()
    driver.fe.push("run the tests")
    wait_for(lambda: driver.ghost() == "run the tests", "ghost text")
    driver.keys("run t", settle=lambda: driver.buf.text == "run t" and driver.ghost() == "he tests")
    driver.keys(
        "\x7f", settle=lambda: driver.buf.text == "run " and driver.ghost() == "the tests"
    )  # Backspace
    driver.keys(TAB, settle=lambda: driver.buf.text == "run the tests")
    assert driver.ghost() is None
    driver.inp.send_text(ENTER)
    assert driver.finish() == "run the tests"
    assert driver.diverged == 0


def test_right_arrow_accepts(driver: Driver) -> None:
    driver.start()
    driver.fe.push("run the tests")
    wait_for(lambda: driver.ghost() == "run the tests", "ghost text")
    driver.keys(RIGHT, settle=lambda: driver.buf.text == "run the tests")
    driver.inp.send_text(ENTER)
    assert driver.finish() == "run the tests"


def test_typing_over_the_ghost_hides_it_and_editing_back_restores_it(driver: Driver) -> None:
    driver.start()
    driver.fe.push("run the tests")
    wait_for(lambda: driver.ghost() == "run the tests", "ghost text")
    driver.keys("ru", settle=lambda: driver.buf.text == "ru")
    assert driver.diverged == 0
    driver.keys("x", settle=lambda: driver.buf.text == "rux")
    assert driver.ghost() is None and driver.fe.prediction() == "run the tests"  # hidden, kept
    assert driver.diverged == 1
    driver.keys("yz", settle=lambda: driver.buf.text == "ruxyz")
    assert driver.diverged == 1  # reported once per divergence
    driver.keys("\x7f\x7f\x7f", settle=lambda: driver.buf.text == "ru")
    assert driver.ghost() == "n the tests"  # a prefix again: the ghost (and its speculation) is back
    driver.keys(TAB, settle=lambda: driver.buf.text == "run the tests")
    driver.inp.send_text(ENTER)
    assert driver.finish() == "run the tests"


def test_abort_policy_drops_the_prediction_on_divergence() -> None:
    with create_pipe_input() as inp, ThreadPoolExecutor(1) as pool:
        hits: list[int] = []
        fe = PromptFrontend(
            toolbar=lambda: "",
            on_diverge=lambda: hits.append(1),
            input=inp,
            output=DummyOutput(),
            policy="abort",
        )
        d = Driver(fe, inp, pool)
        d.start()
        fe.push("run the tests")
        wait_for(lambda: d.ghost() == "run the tests", "ghost text")
        d.keys("rux", settle=lambda: d.buf.text == "rux")
        d.keys("\x7f", settle=lambda: d.buf.text == "ru")
        assert d.ghost() is None and fe.prediction() is None and hits == [1]
        inp.send_text(ENTER)
        assert d.finish() == "ru"


@pytest.mark.parametrize("newline", ["\x1b\r", "\n", "\\\r"], ids=["esc-enter", "ctrl-j", "backslash"])
def test_multiline_input(driver: Driver, newline: str) -> None:
    driver.start()
    driver.keys("first" + newline, settle=lambda: driver.buf.text == "first\n")
    driver.keys("second", settle=lambda: driver.buf.text == "first\nsecond")
    driver.inp.send_text(ENTER)
    assert driver.finish() == "first\nsecond"


def test_ctrl_c_stops_a_running_speculation_then_clears_the_line() -> None:
    with create_pipe_input() as inp, ThreadPoolExecutor(1) as pool:
        stops: list[int] = []
        running = [True]

        def stop() -> None:
            stops.append(1)
            running[0] = False

        fe = PromptFrontend(
            toolbar=lambda: "",
            on_diverge=lambda: None,
            input=inp,
            output=DummyOutput(),
            on_stop=stop,
            running=lambda: running[0],
        )
        d = Driver(fe, inp, pool)
        d.start()
        fe.push("run the tests")
        d.keys("ru", settle=lambda: d.buf.text == "ru")
        d.keys("\x03", settle=lambda: stops == [1])
        assert d.buf.text == "ru" and d.ghost() is None  # the line stays; the speculation is stopped
        inp.send_text("\x03")  # nothing running now: Ctrl-C clears the line (the prompt ends)
        with pytest.raises(KeyboardInterrupt):
            d.finish()


def test_ctrl_r_searches_the_history(driver: Driver) -> None:
    for line in ("explain the cart", "run the tests", "fix the pager"):
        driver.fe.session.history.append_string(line)
    driver.start()
    driver.keys("\x12cart", settle=lambda: driver.fe.session.app.layout.is_searching)
    driver.keys(ENTER, settle=lambda: driver.buf.text == "explain the cart")  # ends the search, match kept
    driver.inp.send_text(ENTER)
    assert driver.finish() == "explain the cart"


def test_enter_on_empty_line_does_nothing(driver: Driver) -> None:
    driver.start()
    driver.fe.push("run the tests")
    wait_for(lambda: driver.ghost() == "run the tests", "ghost text")
    driver.inp.send_text(ENTER)
    driver.inp.send_text("   " + ENTER)
    wait_for(lambda: driver.buf.text == "   ", "the spaces typed")
    time.sleep(0.2)  # for the Enter after them (too short only makes the next lines pass, never fail)
    assert driver.result is not None and not driver.result.done()
    assert driver.buf.text == "   "  # an Enter on blanks neither submits nor clears them
    driver.keys("\x7f\x7f\x7fhello", settle=lambda: driver.buf.text == "hello")
    driver.inp.send_text(ENTER)
    assert driver.finish() == "hello"


def test_push_from_many_threads_is_safe(driver: Driver) -> None:
    driver.start()
    threads = [threading.Thread(target=driver.fe.push, args=(f"prompt {i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    final = driver.fe.prediction()
    wait_for(lambda: driver.ghost() == final, "the last pushed prediction")


def test_slash_command_hides_the_ghost_without_dropping_it(driver: Driver) -> None:
    driver.fe.push("run the tests")
    driver.start()
    wait_for(lambda: driver.ghost() == "run the tests", "ghost text")
    driver.keys("/diff", settle=lambda: driver.buf.text == "/diff")
    assert driver.ghost() is None and driver.diverged == 0
    driver.inp.send_text(ENTER)
    assert driver.finish() == "/diff"
    driver.start()  # the next prompt shows the prediction again
    wait_for(lambda: driver.ghost() == "run the tests", "ghost text back")


def test_permission_question_takes_a_choice_or_a_unique_prefix() -> None:
    import trio

    with create_pipe_input() as inp:
        fe = PromptFrontend(toolbar=lambda: "", on_diverge=lambda: None, input=inp, output=DummyOutput())
        inp.send_text("maybe\r")  # not a choice: asked again
        inp.send_text("al\r")
        assert trio.run(fe.ask, "allow Bash(rm -rf build)?", ("y", "n", "always")) == "always"
        inp.send_text("n\r")
        assert trio.run(fe.ask, "allow Bash(rm -rf build)?", ("y", "n", "always")) == "n"
