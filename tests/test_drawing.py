"""The report's figures drawn in processes of their own (``bayes_eval.outputs.drawing``):
the same bytes as drawn in this process, a failure named, and a process that ends first
leaves its figures to this one."""

import pytest

import bayes_eval
from bayes_eval.outputs.drawing import Figures
from bayes_eval.outputs.plots import forest_plot, ppc_plot
from bayes_eval.resources import example_evidence


@pytest.fixture(scope="module")
def summary():
    """An exact fit's summary of the shipped example (no sampling)."""
    return bayes_eval.fit(example_evidence(), "end_to_end").summary(threshold=0.05)


def drawn_here(summary) -> dict:
    with Figures(processes=0) as figures:
        figures.draw("forest.png", forest_plot, summary, threshold=0.05)
        return figures.drawn()


def test_a_drawing_process_draws_the_same_bytes_and_names_a_failure(summary):
    with Figures(processes=1) as figures:
        (worker,) = figures._workers  # it started: the figure is drawn there
        figures.draw("forest.png", forest_plot, summary, threshold=0.05)
        assert figures.drawn() == drawn_here(summary)
        figures.draw("ppc.png", ppc_plot, "not a table of checks")
        with pytest.raises(RuntimeError, match="^figure ppc.png: .*Error"):
            figures.drawn()
        with pytest.raises(ValueError, match="drawn twice"):
            figures.draw("forest.png", forest_plot, summary)

        def of_no_module(path):  # cannot be sent: drawn here, its error its own
            raise OverflowError("drawn here")

        with pytest.raises(OverflowError, match="drawn here"):
            figures.draw("local.png", of_no_module)
    assert worker.poll() is not None  # stopped on leaving


def test_figures_of_a_process_that_ended_are_drawn_here(summary):
    with Figures(processes=1) as figures:
        (worker,) = figures._workers
        worker.kill()
        worker.wait()
        figures.draw("forest.png", forest_plot, summary, threshold=0.05)  # its pipe is closed
        assert figures.drawn() == drawn_here(summary)
