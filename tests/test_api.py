"""The Python API as a PyMC user meets it: typed, with a readable ``repr``."""

import inspect

import pytest

import bayes_eval


def _public_callables():
    for name in bayes_eval.__all__:
        obj = getattr(bayes_eval, name)
        if inspect.isclass(obj):
            for member, value in vars(obj).items():
                if member.startswith("_") and member != "__init__":
                    continue
                if isinstance(value, classmethod | staticmethod):
                    value = value.__func__
                if isinstance(value, property):
                    value = value.fget
                if inspect.isfunction(value):
                    yield f"{name}.{member}", value
        elif inspect.isfunction(obj):
            yield name, obj


@pytest.mark.parametrize(("name", "function"), list(_public_callables()))
def test_every_public_function_is_typed(name, function):
    signature = inspect.signature(function)
    untyped = [
        p
        for p, parameter in signature.parameters.items()
        if p not in ("self", "cls") and parameter.annotation is inspect.Parameter.empty
    ]
    assert untyped == [], f"{name}: untyped parameters {untyped}"
    assert signature.return_annotation is not inspect.Signature.empty, f"{name}: no return type"


def test_the_package_says_it_is_typed():
    from importlib.resources import files

    assert files("bayes_eval").joinpath("py.typed").is_file()


def test_a_posterior_says_what_it_is_without_drawing():
    posterior = bayes_eval.fit(bayes_eval.shipped_datasets()["example_evidence"], "phuong2024")
    text = repr(posterior)
    assert text.startswith("Posterior: model phuong2024 (milestone, pooling none), 2 agent(s)")
    assert "exact (conjugate); 4000 draws made when .tree is read" in text
    assert "posterior" not in posterior._tree  # repr made no draws
    html = posterior._repr_html_()
    assert html.startswith("<pre>Posterior: model phuong2024") and "conjugate" in html
