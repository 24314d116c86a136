import atexit
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

# Hypothesis draws the same examples on every run, so that the suite passes or fails on
# the code and not by chance; HYPOTHESIS_PROFILE=explore draws new ones each run.
settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


def _temporary_folder(variable: str, prefix: str) -> None:
    """Point ``variable`` at a new temporary folder, removed when this process ends,
    unless it is set (xdist's workers inherit the one their controller made)."""
    if variable not in os.environ:
        os.environ[variable] = folder = tempfile.mkdtemp(prefix=prefix)
        atexit.register(shutil.rmtree, folder, ignore_errors=True)


# ArviZ and PyTensor need writable cache folders; the compiled models go to one of the run
# (set before xdist starts its workers, which inherit it), not to the user's.
_temporary_folder("MPLCONFIGDIR", "mpl-")
_temporary_folder("XDG_CACHE_HOME", "bayes-eval-cache-")
# xdist's workers share the cores; a BLAS thread pool in each would oversubscribe them
# (OpenBLAS's threads spin while they wait): one thread each, set before xdist starts its
# workers, which read it when they load numpy.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

STUDIES = Path(__file__).parents[1] / "studies"


@pytest.fixture
def load_study():
    """Import a script of ``studies/`` by name (the studies are scripts, not a package)."""

    def load(name):
        spec = importlib.util.spec_from_file_location(name, STUDIES / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture
def jeffreys_spec(tmp_path):
    """The milestone method under Jeffreys' prior, Beta(1/2, 1/2), as a spec file."""
    import bayes_eval

    text = bayes_eval.shipped_specs()["mats2024"].read_text()
    text = text.replace('name = "mats2024"', 'name = "jeffreys"')
    text = text.replace("alpha = 1.0\nbeta = 1.0", "alpha = 0.5\nbeta = 0.5")
    path = tmp_path / "jeffreys.toml"
    path.write_text(text)
    return path


@pytest.fixture(scope="session")
def dask_scheduler():
    """The address of a two-worker local dask cluster, shared by the tests that sweep
    on a running cluster (``scheduler=``); skipped without dask.distributed."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=50
    ) as cluster:
        yield cluster.scheduler_address


# The heaviest test files, heaviest first (seconds of a default run on 2 cores, 2026-12-06:
# 160 to 45 each). xdist hands whole files to its workers in collection order; started
# first, they leave the short files to even out the workers' ends, where in alphabetical
# order a heavy file started last could keep one worker busy long after the other.
HEAVIEST_FILES = (
    "test_hierarchical.py",
    "test_native.py",
    "test_graded_hierarchy.py",
    "test_graded_joint.py",
    "test_readme.py",
    "test_graded_pooled.py",
    "test_runfolder.py",
    "test_exact_properties.py",
    "test_crossed.py",
    "test_crossed_2pl.py",
    "test_exact_reference.py",
    "test_report.py",
    "test_graded_crossed_milestones.py",
    "test_graded_crossed.py",
    "test_engines.py",
    "test_cli.py",
    "test_inspect_metrics.py",
)


@pytest.hookimpl(trylast=True)  # after pytest-randomly's shuffle, whose order within stays
def pytest_collection_modifyitems(items):
    """The heaviest files first (``HEAVIEST_FILES``), the rest in the order they came."""
    rank = {name: i for i, name in enumerate(HEAVIEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
