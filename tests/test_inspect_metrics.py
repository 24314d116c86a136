"""The Inspect extension's metrics, in real Inspect runs (``inspect_ai.eval`` on Inspect's
built-in ``mockllm/model``, offline: each output carries its usage, so that no tokenizer
is fetched). Skipped without the ``inspect`` extra."""

import ast
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from scipy import special, stats

inspect_ai = pytest.importorskip("inspect_ai", reason="the inspect extra (bayes_eval[inspect])")

from inspect_ai import Task  # noqa: E402
from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.dataset import Sample  # noqa: E402
from inspect_ai.model import ModelOutput, ModelUsage, get_model  # noqa: E402
from inspect_ai.scorer import accuracy, match  # noqa: E402

from bayes_eval.inspect import pass_at_k, posterior_mean, upper_bound  # noqa: E402

SAMPLES, EPOCHS = 4, 5


def _outputs(answers):
    usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    outputs = []
    for answer in answers:
        output = ModelOutput.from_content("mockllm/model", answer)
        output.usage = usage
        outputs.append(output)
    return outputs


def _run(answers, tmp_path, metrics, targets=("yes",) * SAMPLES):
    return _metrics(_log(answers, tmp_path, metrics, targets))


def _log(answers, tmp_path, metrics, targets=("yes",) * SAMPLES):
    task = Task(
        dataset=[Sample(input=f"question {i}", target=t, id=i) for i, t in enumerate(targets)],
        scorer=match(),
        metrics=[accuracy(), *metrics],
        epochs=EPOCHS,
    )
    model = get_model("mockllm/model", custom_outputs=_outputs(answers))
    (log,) = inspect_eval(task, model=model, log_dir=str(tmp_path), display="none")
    assert log.status == "success", log.error
    return log


def _metrics(log):
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


def test_the_command_line_reads_the_same_bound_from_the_log(tmp_path, capsys):
    """``bayes-eval fit LOG --model end_to_end --task-from task`` reads the log of a run
    (every epoch a run) and gives the bound the metric wrote in it, to the last digit."""
    from bayes_eval.cli.main import main

    answers = ["yes" if i % 4 == 1 else "no" for i in range(SAMPLES * EPOCHS)]
    metrics = _run(answers, tmp_path / "logs", [upper_bound()])
    args = ["fit", str(tmp_path / "logs"), "--from", "inspect", "--model", "end_to_end"]
    assert main([*args, "--task-from", "task", "--scorer", "match", "--format", "csv"]) == 0
    header, row = capsys.readouterr().out.splitlines()[:2]
    upper = float(row.split(",")[header.split(",").index("upper")])
    assert upper == metrics["upper_bound"]
    assert upper == pytest.approx(stats.beta.ppf(0.975, 1 + 5, 1 + 15), rel=1e-12)


def _pooled_grid(successes, trials):
    """``end_to_end_pooled``'s posterior of the shapes ``(mu kappa, (1 - mu) kappa)`` on a
    grid, worked here by quadrature (its spec's priors: ``mu ~ Beta(1, 1)``, ``log kappa ~
    Normal(2.3, 1.5)``; the counts' Beta-Binomial likelihood): shapes and weights."""
    mu = np.linspace(0.0005, 0.9995, 1000)
    log_kappa = np.linspace(2.3 - 7 * 1.5, 2.3 + 7 * 1.5, 1200)
    mu, log_kappa = np.meshgrid(mu, log_kappa, indexing="ij")
    a, b = mu * np.exp(log_kappa), (1 - mu) * np.exp(log_kappa)
    log_w = stats.norm.logpdf(log_kappa, 2.3, 1.5)
    for k, n in zip(successes, trials, strict=True):
        log_w += special.betaln(a + k, b + n - k) - special.betaln(a, b)
    w = np.exp(log_w - log_w.max())
    return a, b, w / w.sum()


def test_pass_at_k_against_quadrature_of_the_population_model(tmp_path):
    """6 samples x 5 epochs, each sample a task of its own. The metric's pass@5 of the
    task's samples (MCMC) is the quadrature's posterior mean of ``mean_t E[1 - (1 -
    P_t)^5]`` (given the shapes, ``1 - B(a + k_t, b + n_t - k_t + 5) / B(a + k_t, b + n_t
    - k_t)``) within four Monte Carlo standard errors at an ESS of 1,000 (the fit's
    diagnostics ask for more); its 0.9 upper bound of a new sample's pass@5 (``1 - B(a, b
    + 5) / B(a, b)``) sits at the quadrature's 0.9 quantile, the quadrature's posterior
    probability below it within four standard errors of a 0.9 quantile at that ESS."""
    targets = ("yes", "yes", "yes", "maybe", "no", "never")
    answers = ["yes", "yes", "no", "yes", "maybe"] * 6
    metrics = [pass_at_k(k=5), pass_at_k(k=5, level=0.9, population="new")]
    log = _log(answers, tmp_path, metrics, targets)
    successes, trials = Counter(), Counter()
    for sample in log.samples:  # the counts as Inspect's own reader gives them
        trials[sample.id] += 1
        successes[sample.id] += sample.scores["match"].value == "C"
    k = np.array([successes[i] for i in range(len(targets))])
    n = np.array([trials[i] for i in range(len(targets))])
    assert (n == EPOCHS).all() and 0 < k.sum() < n.sum()
    a, b, w = _pooled_grid(k, n)
    observed = np.mean(
        [-np.expm1(special.betaln(a + kt, b + nt - kt + 5) - special.betaln(a + kt, b + nt - kt))
         for kt, nt in zip(k, n, strict=True)],
        axis=0,
    )  # fmt: skip
    mean = (w * observed).sum()
    sd = np.sqrt((w * (observed - mean) ** 2).sum())
    values = _metrics(log)
    assert abs(values["pass_at_k"] - mean) < 4 * sd / np.sqrt(1000)
    new = -np.expm1(special.betaln(a, b + 5) - special.betaln(a, b))
    below = (w * (new <= values["pass_at_k2"])).sum()
    assert abs(below - 0.9) < 4 * np.sqrt(0.9 * 0.1 / 1000)


TASK_FILE = """
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import accuracy, match

from bayes_eval.inspect import upper_bound

def _answer(i):
    output = ModelOutput.from_content("mockllm/model", "yes" if i % 4 == 1 else "no")
    output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return output


@task
def quiz():
    return Task(
        dataset=[Sample(input=f"question {i}", target="yes", id=i) for i in range(4)],
        scorer=match(),
        metrics=[accuracy(), upper_bound()],
        epochs=5,
        model=get_model("mockllm/model", custom_outputs=[_answer(i) for i in range(20)]),
    )
"""


def _inspect(*arguments, cwd):
    """Inspect's own command line, in a process of its own (no metric imported before)."""
    command = Path(sys.executable).with_name("inspect")
    done = subprocess.run(
        [str(command), *arguments, "--display", "plain"],
        cwd=cwd, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def test_inspect_eval_and_inspect_score_show_the_bound(tmp_path):
    """``inspect eval`` of a task file with ``metrics=[accuracy(), upper_bound()]`` prints
    the bound and writes it in the log (5 successes of 20 runs: Beta(6, 16)'s 0.975
    quantile); ``inspect score --metric bayes_eval/upper_bound`` adds it to the log of a
    task that never named it (the same answers): Inspect finds the metric by name, through
    the entry point, in a process that never imported bayes_eval."""
    from inspect_ai.log import read_eval_log

    bound = stats.beta.ppf(0.975, 1 + 5, 1 + 15)
    (tmp_path / "with.py").write_text(TASK_FILE)
    done = _inspect("eval", "with.py", "--log-dir", "with", cwd=tmp_path)
    assert f"upper_bound  {bound:.3f}" in done.stdout
    (path,) = (tmp_path / "with").glob("*.eval")
    assert _metrics(read_eval_log(str(path)))["upper_bound"] == pytest.approx(bound, rel=1e-12)

    answers = ["yes" if i % 4 == 1 else "no" for i in range(SAMPLES * EPOCHS)]
    without = _log(answers, tmp_path / "without", [])  # a log made in this process
    assert "upper_bound" not in _metrics(without)
    path = without.location
    scored = tmp_path / "scored.eval"
    _inspect(
        "score", str(path), "--metric", "bayes_eval/upper_bound", "--action", "append",
        "--output-file", str(scored), cwd=tmp_path,
    )  # fmt: skip
    assert _metrics(read_eval_log(str(scored)))["upper_bound"] == pytest.approx(bound, rel=1e-12)


def test_inspect_is_used_through_its_public_api_only():
    """No module of the package imports a private module or name of inspect_ai (a part
    or a name starting with an underscore)."""
    import bayes_eval

    private = []
    for path in Path(bayes_eval.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("inspect_ai"):
                names = [node.module, *(alias.name for alias in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name.startswith("inspect_ai")]
            else:
                continue
            if any(part.startswith("_") for name in names for part in name.split(".")):
                private.append(f"{path.name}:{node.lineno}")
    assert not private, private
    used = [
        p.name for p in Path(bayes_eval.__file__).parent.rglob("*.py")
        if "inspect_ai" in p.read_text()
    ]  # fmt: skip
    assert "inspect.py" in used and "inspect_logs.py" in used


def test_pass_at_k_refuses_bad_arguments_where_the_task_is_made():
    """A population or a number of attempts it cannot use is refused when the metric is
    made (with the task), not after the eval has run."""
    from bayes_eval.errors import InputError

    with pytest.raises(InputError, match="population: 'all' is not one of observed, new"):
        pass_at_k(population="all")
    with pytest.raises(InputError, match="attempts: 0 is outside 1 to 1,000,000,000"):
        pass_at_k(k=0)
