import time

from featgraph.timing import best_ms, interleaved_best_ms


def test_best_ms_counts_calls():
    calls = []
    assert best_ms(lambda: calls.append(1), repeat=3, warmup=2) >= 0
    assert len(calls) == 5


def test_interleaved_best_ms_alternates_the_functions():
    calls = []
    times = interleaved_best_ms({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, repeat=3, warmup=1)
    assert set(times) == {"a", "b"} and all(t >= 0 for t in times.values())
    assert calls == ["a", "b"] + ["a", "a", "b", "b"] * 3  # warm-up of each, then per round an untimed
    # and a timed run of each, so each timed run follows its own untimed one


def test_each_timed_run_follows_its_own_untimed_run():
    """The timed run of a function that is slow only right after another function ran (as an allocator
    returning memory makes a fresh allocation fault) is not charged for the other function."""
    state = {"last": None}

    def slow_after_others(name: str):
        def run() -> None:
            if state["last"] != name:
                time.sleep(0.02)
            state["last"] = name

        return run

    times = interleaved_best_ms({"a": slow_after_others("a"), "b": slow_after_others("b")}, repeat=3, warmup=0)
    assert times["a"] < 10 and times["b"] < 10
