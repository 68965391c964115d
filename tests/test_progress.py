import io

from featgraph.progress import Progress


def test_logs_get_the_first_step_a_line_per_tenth_and_the_end():
    stream = io.StringIO()
    with Progress(20, "tune", stream=stream) as bar:
        for step in range(20):
            bar.update(status=f"step {step}")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 11 and lines[-1].startswith("tune [########################] 20/20")


def test_disabled_bar_writes_nothing_but_still_counts():
    stream = io.StringIO()
    with Progress(5, "tune", stream=stream, enabled=False) as bar:
        bar.update(3)
    assert stream.getvalue() == "" and bar.done == 3


def test_progress_never_passes_its_total():
    stream = io.StringIO()
    bar = Progress(2, "x", stream=stream)
    bar.update(5)
    assert bar.done == 2 and "2/2" in stream.getvalue()
