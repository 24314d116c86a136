"""The Inspect extension's metrics, in real Inspect runs (``inspect_ai.eval`` on Inspect's
built-in ``mockllm/model``, offline: each output carries its usage, so that no tokenizer
is fetched). Skipped without the ``inspect`` extra."""

import pytest
from scipy import stats

inspect_ai = pytest.importorskip("inspect_ai", reason="the inspect extra (bayes_eval[inspect])")

from inspect_ai import Task  # noqa: E402
from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.dataset import Sample  # noqa: E402
from inspect_ai.model import ModelOutput, ModelUsage, get_model  # noqa: E402
from inspect_ai.scorer import accuracy, match  # noqa: E402

from bayes_eval.inspect import posterior_mean, upper_bound  # noqa: E402

SAMPLES, EPOCHS = 4, 5


def _outputs(answers):
    usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    outputs = []
    for answer in answers:
        output = ModelOutput.from_content("mockllm/model", answer)
        output.usage = usage
        outputs.append(output)
    return outputs


def _run(answers, tmp_path, metrics):
    task = Task(
        dataset=[Sample(input=f"question {i}", target="yes", id=i) for i in range(SAMPLES)],
        scorer=match(),
        metrics=[accuracy(), *metrics],
        epochs=EPOCHS,
    )
    model = get_model("mockllm/model", custom_outputs=_outputs(answers))
    (log,) = inspect_eval(task, model=model, log_dir=str(tmp_path), display="none")
    assert log.status == "success", log.error
    # the metrics of every epoch's scores are a view of their own (no reducer)
    return {name: m.value for score in log.results.scores for name, m in score.metrics.items()}


def test_bounds_in_a_real_inspect_log(tmp_path):
    """4 samples x 5 epochs, no success: every epoch is a run, so the bound is the 0.975
    quantile of Beta(1, 1 + 20) (scipy: 0.1611) and the mean 1/22, in the log's
    results. With 7 successes among the 20 runs (the mock's answers in order), Beta(8,
    14)'s."""
    metrics = _run(["no"] * SAMPLES * EPOCHS, tmp_path / "none", [upper_bound(), posterior_mean()])
    assert metrics["accuracy"] == 0.0
    assert metrics["upper_bound"] == pytest.approx(stats.beta.ppf(0.975, 1, 21), abs=1e-4)
    assert abs(metrics["upper_bound"] - 0.1611) < 1e-4
    assert metrics["posterior_mean"] == pytest.approx(1 / 22, rel=1e-9)
    answers = ["yes" if i % 3 == 0 else "no" for i in range(SAMPLES * EPOCHS)]
    metrics = _run(answers, tmp_path / "some", [upper_bound(level=0.9)])
    assert metrics["upper_bound"] == pytest.approx(stats.beta.ppf(0.9, 8, 14), rel=1e-9)


def test_the_command_line_reads_the_same_bound_from_the_log(tmp_path):
    """``bayes-eval fit LOG --model end_to_end --task-from task`` reads the log of a run
    (every epoch a run) and gives the bound the metric wrote in it, to the last digit."""
    import subprocess
    import sys

    answers = ["yes" if i % 4 == 1 else "no" for i in range(SAMPLES * EPOCHS)]
    metrics = _run(answers, tmp_path / "logs", [upper_bound()])
    done = subprocess.run(
        [
            sys.executable, "-m", "bayes_eval", "fit", str(tmp_path / "logs"),
            "--from", "inspect", "--model", "end_to_end", "--task-from", "task",
            "--scorer", "match", "--format", "csv",
        ],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    header, row = done.stdout.splitlines()[:2]
    upper = float(row.split(",")[header.split(",").index("upper")])
    assert upper == metrics["upper_bound"]
    assert upper == pytest.approx(stats.beta.ppf(0.975, 1 + 5, 1 + 15), rel=1e-12)
