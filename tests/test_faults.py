"""Faults while a run is written: a full or read-only disk, a mount point, a name too
long, standard output closed or full. Each ends in one ``error:`` line with exit status 2,
no traceback and no crash; the staging folder is removed and an earlier run at ``--out``
is left as it was. The tests that need a small file system mount one (root, as in CI) and
skip, saying why, where they cannot."""

import errno
import os
import subprocess
import sys

import pytest

from bayes_eval.cli.main import main
from bayes_eval.outputs import runfolder

TABLE = "task,method,successes,trials\nt1,end_to_end,1,4\nt2,end_to_end,0,4\n"


def bayes_eval(*args, **options):
    """The command line in a new process (a crash is its exit status, not the test's)."""
    command = [sys.executable, "-m", "bayes_eval", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, **options)


def fit_into(table, out, **options):
    return bayes_eval("fit", table, "--model", "end_to_end", "--out", out, **options)


def snapshot(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def staging_folders(parent):
    return [p.name for p in parent.iterdir() if p.name.startswith(runfolder.STAGING_PREFIX)]


def one_error_line(result, *fragments):
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr and "failed:" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MB tmpfs, unmounted afterwards; the test skips where it cannot be mounted."""
    folder = tmp_path / "disk"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(folder)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"needs root to mount a small tmpfs: {mounted.stderr.decode().strip()}")
    yield folder
    subprocess.run(["umount", "-l", str(folder)], check=True)


@pytest.fixture
def table(tmp_path):
    path = tmp_path / "e.csv"
    path.write_text(TABLE)
    return path


def test_a_disk_that_fills_ends_in_one_line_and_keeps_the_earlier_run(small_disk, table):
    """A run written where 8 KB are left, less than its posterior.nc (26 KB): exit 2 and
    one line naming the file that could not be written (HDF5 writing straight to the full
    disk crashed the process at exit with a segmentation fault); the earlier run is
    untouched."""
    out = small_disk / "run"
    assert fit_into(table, out).returncode == 0
    earlier = snapshot(out)
    (small_disk / "filler").write_bytes(b"\0" * (2 * 2**20 - 8 * 2**10 - _used(small_disk)))
    result = fit_into(table, out)
    one_error_line(result, f"--out: cannot write posterior.nc to {out}", "No space left")
    assert snapshot(out) == earlier and staging_folders(small_disk) == []


def test_a_read_only_disk_ends_in_one_line(small_disk, table):
    out = small_disk / "run"
    assert fit_into(table, out).returncode == 0
    earlier = snapshot(out)
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    one_error_line(fit_into(table, out), "--out: cannot write in", "(a read-only file system)")
    assert snapshot(out) == earlier


def test_a_mount_point_as_out_ends_in_one_line(small_disk, table):
    """A mount point cannot be renamed (EBUSY): the line says to give a folder inside it."""
    result = fit_into(table, small_disk)
    one_error_line(result, f"cannot put the run in place at {small_disk}", "folder inside it")
    assert list(small_disk.iterdir()) == []


def _used(folder) -> int:
    stats = os.statvfs(folder)
    return (stats.f_blocks - stats.f_bfree) * stats.f_frsize


def test_a_name_too_long_is_refused_before_the_fit(table, tmp_path):
    out = tmp_path / ("x" * 300)
    result = fit_into(table, out)
    one_error_line(result, "--out: the folder name is 300 bytes long, over the limit of 255")
    assert staging_folders(tmp_path) == []


@pytest.mark.parametrize("failing_call", [1, 2])
def test_a_rename_that_fails_leaves_the_earlier_run(
    monkeypatch, capsys, table, tmp_path, failing_call
):
    """Replacing a run is two renames (the earlier run aside, the new one in): where
    either fails (EBUSY here), the earlier run is in its place, whole, and no staging
    folder is left."""
    out = tmp_path / "run"
    assert main(["fit", str(table), "--model", "end_to_end", "--out", str(out)]) == 0
    earlier = snapshot(out)
    capsys.readouterr()
    calls, replace = [], os.replace

    def busy(source, target):
        calls.append(source)
        if len(calls) == failing_call:
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(source))
        replace(source, target)

    monkeypatch.setattr(runfolder.os, "replace", busy)
    status = main(["fit", str(table), "--model", "end_to_end", "--out", str(out)])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1
    assert err.startswith(f"error: --out: cannot put the run in place at {out} (Device or")
    assert snapshot(out) == earlier and staging_folders(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.csv", "run"]


@pytest.mark.parametrize(
    "stdout, message",
    [
        ("closed", "error: cannot write standard output (it is closed)"),
        ("/dev/full", "error: cannot write standard output (No space left on device)"),
    ],
)
def test_standard_output_that_cannot_be_written_ends_in_one_line(table, stdout, message):
    """`bayes-eval fit ... >&-` and `> /dev/full`: one line and exit 2, not an
    AttributeError or Python's "Exception ignored" at exit."""
    if stdout == "closed":
        result = bayes_eval("fit", table, "--model", "end_to_end", preexec_fn=lambda: os.close(1))
        result_err = result.stderr
    else:
        if not os.path.exists("/dev/full"):
            pytest.skip("no /dev/full on this system")
        with open(stdout, "w") as full:
            command = [sys.executable, "-m", "bayes_eval", "fit", str(table)]
            result = subprocess.run(
                [*command, "--model", "end_to_end"], stdout=full, stderr=subprocess.PIPE, text=True
            )
        result_err = result.stderr
    assert result.returncode == 2
    assert result_err.splitlines() == [message]
