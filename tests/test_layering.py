"""The package's layers hold (the import-linter contracts in ``pyproject.toml``), every
folder is a layer that says what lives in it, and its modules keep their private names to
themselves: a name that a sibling imports is public in its module."""

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "bayes_eval"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CONTRACTS = PYPROJECT["tool"]["importlinter"]["contracts"]
FOLDERS = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))


def test_the_layering_contracts_are_kept():
    """``lint-imports`` over the working tree (it reads ``pyproject.toml`` from the
    current folder, and imports the package from there)."""
    command = "from importlinter.cli import lint_imports_command; lint_imports_command()"
    done = subprocess.run(
        [sys.executable, "-c", command, "--no-cache"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in done.stdout


def test_every_folder_is_a_layer_with_its_own_contract_and_a_docstring():
    """A new folder cannot slip past the layering: the top contract names it, a folder of
    several modules orders them in a contract of its own, its ``__init__`` says in a
    paragraph what lives there and what it may import, and the wheel carries it."""
    top = next(c for c in CONTRACTS if c.get("containers") == ["bayes_eval"])
    layers = {part.strip() for layer in top["layers"] for part in layer.split("|")}
    assert set(FOLDERS) <= layers
    inner = {
        name.removeprefix("bayes_eval.")
        for contract in CONTRACTS
        for name in contract.get("containers", []) + contract.get("modules", [])
    }
    for folder in FOLDERS:
        modules = [p for p in (PACKAGE / folder).glob("*.py") if p.name != "__init__.py"]
        if len(modules) > 1:
            assert any(name.split(".")[0] == folder for name in inner), folder
        doc = ast.get_docstring(ast.parse((PACKAGE / folder / "__init__.py").read_text()))
        assert doc and len(doc.split()) >= 30, folder
    packages = PYPROJECT["tool"]["setuptools"]["packages"]
    assert {f"bayes_eval.{folder}" for folder in FOLDERS} <= set(packages)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_names_crossing(text: str, module: str) -> list[str]:
    """Where ``module``'s source ``text`` imports a private name of another of the
    package's modules (``from bayes_eval.x import _y``), or reads one from a module or
    name it imported from the package (``x._y``): ``line: name``."""
    tree = ast.parse(text)
    imported, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bayes_eval"):
            if node.module == module:
                continue
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{node.lineno}: {node.module}.{alias.name}")
                imported.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("bayes_eval"):
                    imported.add(alias.asname or alias.name.partition(".")[0])
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and _private(node.attr)
            and isinstance(node.value, ast.Name)
            and node.value.id in imported
        ):
            found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_no_module_imports_a_private_name_of_another():
    crossing = [
        f"{path.relative_to(PACKAGE.parent)}:{hit}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for hit in private_names_crossing(path.read_text(), _module_name(path))
    ]
    assert not crossing, crossing


def test_the_check_sees_both_ways_of_reaching_a_private_name():
    """An import of a private name and an attribute read of one are found; a module's own
    private names, dunder names and names outside the package are not."""
    text = (
        "from bayes_eval.evidence.table import _hidden, Evidence\n"
        "from bayes_eval import pooled\n"
        "from bayes_eval.probe import _mine\n"
        "from numpy import _core\n"
        "pooled._layout\n"
        "Evidence.__name__\n"
    )
    assert private_names_crossing(text, "bayes_eval.probe") == [
        "1: bayes_eval.evidence.table._hidden",
        "5: pooled._layout",
    ]


def test_a_constant_in_constants_is_shared_by_two_modules_or_more():
    """A number or name that one module alone uses lives in that module."""
    import re

    text = (PACKAGE / "constants.py").read_text()
    names = [node.targets[0].id for node in ast.parse(text).body if isinstance(node, ast.Assign)]
    sources = {
        path: path.read_text() for path in PACKAGE.rglob("*.py") if path.name != "constants.py"
    }
    users = {
        name: [p.name for p, source in sources.items() if re.search(rf"\b{name}\b", source)]
        for name in names
    }
    alone = {name: found for name, found in users.items() if len(found) < 2}
    assert not alone, alone


def test_no_module_is_longer_than_700_lines_and_each_command_is_thin():
    """A module that grows past 700 lines is split at its seams; a command's module only
    translates flags into calls of the library."""
    from bayes_eval.cli.main import COMMAND_MODULES

    lengths = {path: len(path.read_text().splitlines()) for path in PACKAGE.rglob("*.py")}
    assert not {path.name: n for path, n in lengths.items() if n > 700}
    for name, module in COMMAND_MODULES.items():
        assert lengths[Path(module.__file__)] < 200, name


def test_the_console_script_names_a_function_that_exists():
    """``bayes-eval`` is the function ``[project.scripts]`` names, importable as named (a
    moved module breaks the installed command, which the tests otherwise reach through
    ``main`` or ``python -m bayes_eval``): ``command``, which runs ``main`` and ends the
    process, as ``python -m bayes_eval`` does."""
    import importlib

    from bayes_eval.cli.main import command

    module, _, name = PYPROJECT["project"]["scripts"]["bayes-eval"].partition(":")
    assert getattr(importlib.import_module(module), name) is command


HEAVY = ("numpy", "pandas", "scipy", "xarray", "pymc", "rich")


def _imported_by(code: str) -> list[str]:
    """The heavy libraries a fresh interpreter has imported after running ``code``."""
    probe = f"{code}\nimport sys\nprint(*sorted(m for m in {HEAVY!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_the_package_and_the_command_lines_help_load_no_numerical_library():
    """``import bayes_eval``, ``--version`` and ``--help`` (of the command line and of each
    command) wait for no numerical library: they load on first use."""
    from bayes_eval.cli.main import COMMAND_MODULES

    assert _imported_by("import bayes_eval") == []
    # a module of the package loads when it is read, as it did when the package loaded all
    assert _imported_by("import bayes_eval\nassert bayes_eval.resources.example_evidence()") == []
    for argv in (["--version"], ["--help"], *([name, "--help"] for name in COMMAND_MODULES)):
        code = (
            "import contextlib, io\nfrom bayes_eval.cli.main import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            f"    main({argv!r})"
        )
        assert _imported_by(code) == [], argv


def test_a_public_name_is_what_it_names_whichever_module_loaded_first():
    """``bayes_eval.fit`` and ``bayes_eval.prior_family`` stay functions although
    modules of the same names load on first use (the import system binds a submodule on
    its package)."""
    code = (
        "import bayes_eval, bayes_eval.checks.agents\n"  # loads the modules fit, prior_family
        "assert callable(bayes_eval.fit) and callable(bayes_eval.prior_family)\n"
        "assert all(hasattr(bayes_eval, name) for name in bayes_eval.__all__)\n"
        "from bayes_eval.fit import fit_per_agent\n"
        "assert bayes_eval.fit_per_agent is fit_per_agent"
    )
    assert "numpy" in _imported_by(code)


# Where a model's kind, pooling or family may still decide what code does: the registry,
# the family objects, and (for now) the families' own model code, which switches on kind
# within its family (``pooled``, ``crossed``, and the layout they share, ``counts``).
# The registry, where a model is named, and the families' index, which finds a model's
# family object by it.
SWITCHES_ALLOWED = ("registry.py", "families/__init__.py")
MODEL_NAMES = ("kind", "pooling", "family")


def model_switches(source: str) -> list[str]:
    """The comparisons of a model's ``kind``, ``pooling`` or ``family`` attribute (a
    spec's, a registry entry's) in ``source``, and the lookups keyed by one (``[...]``,
    ``.get(...)``), as ``line: code`` (an array's ``dtype.kind`` is not a model's)."""

    def of_a_model(node) -> bool:
        return (
            isinstance(node, ast.Attribute)
            and node.attr in MODEL_NAMES
            and not (isinstance(node.value, ast.Attribute) and node.value.attr == "dtype")
            and not (isinstance(node.value, ast.Name) and node.value.id == "self")
        )

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            hit = any(of_a_model(side) for side in (node.left, *node.comparators))
        elif isinstance(node, ast.Call):
            called = node.func
            looked_up = isinstance(called, ast.Attribute) and called.attr == "get"
            hit = looked_up and bool(node.args) and of_a_model(node.args[0])
        else:
            hit = isinstance(node, ast.Subscript) and of_a_model(node.slice)
        if hit:
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_outside_the_registry_switches_on_a_models_kind():
    """Every module but the registry (and the families' index, which finds a model's family
    object by its entry) asks a model's registry entry or family object what it needs (the
    methods it uses, the method of its cells, its paths, what it predicts), never which
    kind, pooling or family it is: not the families, nor the pooled and crossed models, nor
    the layer of counts under them. Adding a model of an existing family is its spec, a
    registry entry and its builder."""
    switches = [
        f"{path.relative_to(PACKAGE)}:{hit}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if not str(path.relative_to(PACKAGE)).startswith(SWITCHES_ALLOWED)
        for hit in model_switches(path.read_text())
    ]
    assert not switches, switches


def test_the_switch_check_finds_comparisons_and_lookups_of_a_models_kind():
    code = (
        "if spec.kind == 'joint': pass\n"
        "x = TABLE[posterior.spec.pooling]\n"
        "y = model.family != EXACT\n"
        "z = column.dtype.kind == 'f'\n"
        "w = self.kind == 'log density'\n"
        "v = NAMES.get(spec.kind, 'mu')\n"
        "u = f'{spec.kind}/{spec.pooling}'\n"
    )
    assert [hit.split(":")[0] for hit in model_switches(code)] == ["1", "2", "3", "6"]


def test_no_function_takes_more_than_seven_positional_parameters():
    """Options travel as values (``FitOptions``, a registry entry, a family object) or by
    name: no function or method of the package takes more than seven parameters by
    position (``self`` and ``cls`` aside; keyword-only options are free)."""
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                named = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
                positional = [name for name in named if name not in ("self", "cls")]
                if len(positional) > 7:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}")
    assert not long, long
