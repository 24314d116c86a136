"""Every shell and Python block of the README and of ``docs/`` runs, in a fresh folder.

A block may be preceded by ``<!-- readme-test: slow (why) -->`` (it runs in the slow
suite), ``<!-- readme-test: clone (why) -->`` (the set-up: it runs in the slow suite in a
fresh clone of the repository, installing from scratch) or ``<!-- readme-test: skip (why)
-->`` (where something else runs it: the test command is what ``.ci/run`` runs; the
worked example has its own test). Synopses are ``text`` blocks; a ``toml`` block (a
spec's fragment) must parse. Shell blocks run under bash with ``bayes-eval`` standing for
this Python's ``-m bayes_eval`` and its environment's commands (``inspect``) on the
path; the shipped ``data/`` folder is linked into the fresh
folder, so relative paths work as they do from a clone.
"""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(
    r"(?:<!-- readme-test: (?P<mark>\w+)[^>]*-->\n)?```(?P<language>\w+)\n(?P<code>.*?)```",
    re.DOTALL,
)


PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks() -> list:
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in BLOCK.finditer(text):
            language, mark = match["language"], match["mark"]
            if language not in ("bash", "sh", "python", "toml") or mark == "skip":
                continue
            line = text[: match.start("code")].count("\n") + 1
            marks = [pytest.mark.slow] if mark in ("slow", "clone") else []
            name = f"{page.relative_to(ROOT)} line {line}"
            found.append(
                pytest.param(language, match["code"], mark == "clone", id=name, marks=marks)
            )
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_block_is_marked_or_runs(page):
    """The blocks a page shows in a runnable language: each runs here or says why not."""
    text = page.read_text()
    languages = {m["language"] for m in BLOCK.finditer(text)}
    assert languages <= {"bash", "python", "text", "toml"}
    skipped = [m for m in BLOCK.finditer(text) if m["mark"] == "skip"]
    assert all("(" in text[m.start() : m.start("language")] for m in skipped)  # with a reason


def test_the_readme_runs_its_blocks_and_ci_its_test_command():
    text = (ROOT / "README.md").read_text()
    assert sum(param.id.startswith("README.md") for param in blocks()) >= 3
    skipped = [m for m in BLOCK.finditer(text) if m["mark"] == "skip"]
    test_command = next(m["code"] for m in skipped if "pytest" in m["code"]).strip()
    assert test_command in (ROOT / ".ci" / "run").read_text()  # CI runs exactly this


def test_the_readme_is_short():
    """A newcomer's page: reference material and results live in docs/."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


@pytest.mark.parametrize(("language", "code", "clone"), blocks())
def test_readme_block_runs(language, code, clone, tmp_path, monkeypatch):
    if clone:  # the set-up, as a new user runs it: in a fresh clone, from scratch
        subprocess.run(["git", "clone", "-q", str(ROOT), str(tmp_path / "clone")], check=True)
        done = subprocess.run(
            ["bash", "-c", f"set -e\n{code}"],
            cwd=tmp_path / "clone",
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return
    if language == "toml":  # a spec's fragment: it parses
        assert tomllib.loads(code)
        return
    (tmp_path / "data").symlink_to(ROOT / "data")
    if language == "python":
        monkeypatch.chdir(tmp_path)
        exec(compile(code, "README block", "exec"), {"__name__": "readme"})
        return
    bin_dir = Path(sys.executable).parent  # the environment's commands (inspect)
    script = (
        f'export PATH="{bin_dir}:$PATH"\n'
        f'bayes-eval() {{ "{sys.executable}" -m bayes_eval "$@"; }}\nset -e\n{code}'
    )
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=1200
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_links_stay_inside_the_project():
    """Every relative link of the README and docs/ names a file of the project, and none
    points outside it (the design notes the project was built from are not shipped)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert len(pages) >= 5
    for page in pages:
        text = page.read_text()
        assert "../shared" not in text and "DESIGN" not in text, page.name
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
            if "://" in target:
                continue
            resolved = (page.parent / target).resolve()
            assert resolved.exists() and ROOT in resolved.parents, (page.name, target)
