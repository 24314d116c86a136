"""The crossed model's surprising pairs: a learned share of the pairs whose departure from
the additive prediction has a wider scale (``surprise_share``, ``surprise_width``). The
draw of whether a pair surprises, the simulation, a new task's pass@k and the horizons'
offsets against their closed forms and scipy's quadrature; the likelihood is held to the
graph in tests/test_log_likelihood.py and the model to its prior by SBC in
tests/test_crossed.py (the shipped spec's priors)."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import integrate, special, stats

from bayes_eval import InputError
from bayes_eval.crossed.horizon import success_offset
from bayes_eval.results.population import NewTask
from bayes_eval.specs import load_spec, spec_from_toml

ROOT_2PI = math.sqrt(2 * math.pi)


def _post(**values):
    """Posterior draws as the draw-back reads them: ``name.values`` per (chain, draw)."""
    return {name: SimpleNamespace(values=v) for name, v in values.items()}


def test_a_pair_is_drawn_surprising_with_its_posterior_probability():
    """A pair run is drawn surprising with probability ``s L_w / (s L_w + (1 - s) L)``,
    ``L`` and ``L_w`` the binomial likelihood of its runs at its logit under each scale
    (its sampled ``z`` alike); a pair never run with the share ``s``; a surprising pair's
    departure has scale ``cell_scale (1 + surprise_width)``."""
    from bayes_eval.crossed.departures import surprise_scales

    draws = 200_000
    layout = SimpleNamespace(
        pair_agent=np.array([0, 0]),
        pairs=[("a", "t0"), ("a", "t1")],
        e2e_k=np.array([3, 0]),
        e2e_n=np.array([8, 8]),
        grading=None,
        clusters=None,
    )
    design = SimpleNamespace(layout=layout, pair_task=np.array([0, 1]))
    post = _post(
        cell_scale=np.full((1, draws), 0.9),
        surprise_share=np.full((1, draws), 0.1),
        surprise_width=np.full((1, draws), 2.0),
    )
    eta = np.broadcast_to(np.array([[-4.0, -4.0, 1.0]]), (1, draws, 1, 3)).copy()
    z = np.broadcast_to(np.array([[1.2, 0.3, 0.0]]), (1, draws, 1, 3)).copy()
    scales = surprise_scales(post, eta, z, design, np.random.default_rng(0))
    narrow, wide = 0.9, 0.9 * 3.0
    assert set(np.unique(scales)) == {narrow, wide}
    for pair, (k, n) in enumerate(((3, 8), (0, 8))):
        usual = stats.binom.pmf(k, n, special.expit(-4.0 + narrow * z[0, 0, 0, pair]))
        surprising = stats.binom.pmf(k, n, special.expit(-4.0 + wide * z[0, 0, 0, pair]))
        expected = 0.1 * surprising / (0.1 * surprising + 0.9 * usual)
        observed = (scales[..., 0, pair] == wide).mean()
        assert abs(observed - expected) < 4 * math.sqrt(expected * (1 - expected) / draws)
    assert (scales[..., 0, 0] == wide).mean() > 0.5  # 3 of 8 where 0.06 was expected
    never = (scales[..., 0, 2] == wide).mean()  # the third task was never run
    assert abs(never - 0.1) < 4 * math.sqrt(0.09 / draws)


def test_the_simulated_departures_are_the_mixture_of_two_normals():
    """``simulate`` (SBC's counts) departs from the additive logit by ``N(0, s)`` or, with
    the share, ``N(0, s (1 + w))``: Kolmogorov-Smirnov against the mixture's CDF."""
    from bayes_eval.crossed.model import simulate

    pairs = 20_000
    layout = SimpleNamespace(
        pair_agent=np.zeros(pairs, dtype=int),
        e2e_n=np.full(pairs, 3),
        grading=None,
        clusters=None,
    )
    design = SimpleNamespace(layout=layout, pair_task=np.zeros(pairs, dtype=int))
    truth = {
        "ability": np.array([0.5]),
        "difficulty": np.array([0.0]),
        "cell_scale": 0.8,
        "surprise_share": 0.15,
        "surprise_width": 2.5,
    }
    spec = load_spec("crossed")
    data, p_task = simulate(truth, design, spec, np.random.default_rng(1))
    departure = special.logit(p_task) - 0.5

    def mixture(x):
        return 0.85 * stats.norm.cdf(x, 0, 0.8) + 0.15 * stats.norm.cdf(x, 0, 0.8 * 3.5)

    assert stats.kstest(departure, mixture).pvalue > 0.01
    assert stats.kstest(departure, stats.norm(0, 0.8).cdf).pvalue < 1e-6
    assert data["k_obs"].shape == (pairs,) and (data["k_obs"] <= 3).all()


@pytest.mark.parametrize("k", [1, 10**3, 10**9])
def test_a_new_tasks_pass_at_k_averages_the_two_departures(k):
    """A new task of a crossed fit with surprising pairs: its logit is ``N(c, a)`` or,
    with the share, ``N(c, b)``; ``NewTask`` of the two weighted against scipy."""
    centre, narrow, wide, share = -3.0, 1.3, 3.9, 0.12

    def expected(power):
        def rate(z, scale):
            log_p = -np.logaddexp(0.0, -(centre + scale * z))
            log_q = -np.logaddexp(0.0, centre + scale * z)
            value = -np.expm1(k * log_q) if power == "at" else np.exp(k * log_p)
            return value * np.exp(-z * z / 2) / ROOT_2PI

        parts = [
            integrate.quad(rate, -40, 40, args=(s,), points=[0.0], limit=400, epsabs=0)[0]
            for s in (narrow, wide)
        ]
        return (1 - share) * parts[0] + share * parts[1]

    task = NewTask(np.array(centre), [np.array(narrow), np.array(wide)], [1 - share, share])
    assert float(task.at_least_one(k)) == pytest.approx(expected("at"), rel=1e-6, abs=1e-40)
    assert float(task.every(k)) == pytest.approx(expected("all"), rel=1e-6, abs=1e-40)


def test_the_horizons_offset_averages_the_two_departures():
    """``c`` with ``(1 - s) E[logistic(c - u + a e)] + s E[logistic(c - u + b e)] = 0.8``,
    ``u ~ N(0, sigma^2)``: each expectation by scipy's quadrature over one normal of
    scale ``hypot(sigma, a)`` (and ``b``)."""
    for sigma, cell, width, share in ((1.3, 0.8, 2.0, 0.1), (3.3, 1.2, 2.2, 0.12)):
        wide = cell * (1 + width)
        c = success_offset(0.8, np.array([sigma]), cell, 0.0, wide, share)[0]

        def mean(scale, c=c, sigma=sigma):
            width = math.hypot(sigma, scale)
            return integrate.quad(
                lambda v: special.expit(c - width * v) * np.exp(-v * v / 2) / ROOT_2PI,
                -30,
                30,
                epsabs=1e-13,
                limit=200,
            )[0]

        assert (1 - share) * mean(cell) + share * mean(wide) == pytest.approx(0.8, abs=1e-8)
        # no share: the one-scale rule
        assert success_offset(0.8, sigma, cell, 0.0, wide, 0.0) == pytest.approx(
            success_offset(0.8, np.hypot(sigma, cell))
        )


@pytest.mark.parametrize(
    "given, missing", [("surprise_share", "surprise_width"), ("surprise_width", "surprise_share")]
)
def test_one_of_the_two_roles_without_the_other_is_refused(given, missing):
    shipped = load_spec("crossed").text
    start = shipped.index(f"[priors.{missing}]")
    end = shipped.index("[priors.", start + 1)
    text = shipped[:start] + shipped[end:]
    with pytest.raises(InputError) as raised:
        spec_from_toml(text, "mine.toml")
    assert str(raised.value) == (
        f"mine.toml: [priors.{given}] needs [priors.{missing}]: surprising pairs are a "
        "share of the pairs and the scale of their extra departure, both or neither"
    )


def test_a_new_tasks_draws_do_not_depend_on_their_block(monkeypatch):
    """The new task of a crossed fit with surprising pairs, from 300 draws of 3 agents:
    every block on the one grid of logits, so that blocks of 7 draws, or of one, give the
    blocks of 100's numbers bit for bit, and each draw's pass@k is its own two-component integral
    (on a grid sized for that draw alone, to 1e-9 relative); its curves over several
    ``k`` at once are each ``k``'s, and its least ``k`` is the bisection's over the whole
    range."""
    from bayes_eval.results import population

    rng = np.random.default_rng(8)
    n, agents = 300, 3
    draws = {
        "ability": rng.normal(-2.0, 1.5, (n, agents)),
        "difficulty_scale": rng.lognormal(0.5, 0.3, n),
        "cell_scale": rng.lognormal(0.0, 0.3, n),
        "surprise_share": rng.beta(2, 18, n),
        "surprise_width": rng.lognormal(0.7, 0.5, n),
    }
    posterior = SimpleNamespace(draws=_post(**draws), coords={"agent": ["a", "b", "c"]})

    def pass_at(k):
        count, tasks = population._crossed_new_tasks(posterior)
        assert count == n
        return np.concatenate([task.at_least_one(k) for task in tasks])

    k = 1000
    whole = pass_at(k)
    monkeypatch.setattr(population, "NEW_TASK_BLOCK", 7)
    np.testing.assert_array_equal(pass_at(k), whole)
    monkeypatch.setattr(population, "NEW_TASK_VALUES", 1)  # a draw a block
    np.testing.assert_array_equal(pass_at(k), whole)
    narrow = np.hypot(draws["difficulty_scale"], draws["cell_scale"])
    wide = np.hypot(draws["difficulty_scale"], draws["cell_scale"] * (1 + draws["surprise_width"]))
    for d in (0, 151, 299):
        share = draws["surprise_share"][d]
        own = NewTask(
            draws["ability"][d], [np.array(narrow[d]), np.array(wide[d])], [1 - share, share]
        )
        np.testing.assert_allclose(whole[d], own.at_least_one(k), rtol=1e-9)
    task = next(population._crossed_new_tasks(posterior)[1])
    ks = [1, 37, 10**6]
    at, every = task.curves(ks)
    for n, each in enumerate(ks):
        np.testing.assert_allclose(at[n], task.at_least_one(each), rtol=1e-12)
        np.testing.assert_allclose(every[n], task.every(each), rtol=1e-12)
    for tau in (0.05, 0.5, 0.999):
        found = task.least_k(tau)
        np.testing.assert_array_equal(found, population._least_k(task.at_least_one, tau))
    hopeless = NewTask(np.array([-40.0, 0.0, 2.0]), np.array([1.0, 1.0, 1.0]))
    found = hopeless.least_k(0.5)
    np.testing.assert_array_equal(found, population._least_k(hopeless.at_least_one, 0.5))
    assert np.isinf(found[0]) and found[2] == 1


def _two_agents_three_tasks(rng, chains, draws, k, n):
    """A crossed fit's draws of two agents and three tasks (``rng``'s abilities and
    difficulties; departures' scale 0.8, a share 0.2 surprising at 2.4) and its design:
    four pairs run, (a, t0), (a, t1), (b, t0), (b, t2), with ``k`` of ``n`` successes;
    agent a never ran t2, b never t1."""
    import xarray as xr

    ability = rng.normal(0.0, 1.0, (chains, draws, 2))
    post = xr.Dataset(
        {
            "difficulty": (("chain", "draw", "task"), rng.normal(0.0, 1.0, (chains, draws, 3))),
            "cell_scale": (("chain", "draw"), np.full((chains, draws), 0.8)),
            "surprise_share": (("chain", "draw"), np.full((chains, draws), 0.2)),
            "surprise_width": (("chain", "draw"), np.full((chains, draws), 2.0)),
        }
    )
    layout = SimpleNamespace(
        pair_agent=np.array([0, 0, 1, 1]),
        e2e_k=np.array(k),
        e2e_n=np.array(n),
        grading=None,
        clusters=None,
    )
    return post, ability, SimpleNamespace(layout=layout, pair_task=np.array([0, 1, 0, 2]))


def test_the_pairs_rates_are_drawn_a_block_of_draws_at_a_time(monkeypatch):
    """Every pair's rate, drawn a block of draws at a time (``RATE_VALUES``; here also one
    draw a block): the same numbers from the same generator; a pair run departs by its
    sampled ``z`` at the narrow or the wide scale; a pair never run by a fresh departure
    of each block's own generator, the two-normal mixture (mean 0, variance ``(1 - s) a^2
    + s b^2``) and never the same in two draws."""

    from bayes_eval.crossed import departures

    chains, draws = 2, 4000
    rng = np.random.default_rng(3)
    post, ability, design = _two_agents_three_tasks(rng, chains, draws, [3, 0, 1, 2], [8, 8, 2, 5])
    post["cell_z"] = (("chain", "draw", "rate"), rng.normal(0.0, 1.0, (chains, draws, 4)))
    layout = design.layout
    eta = ability[..., :, None] - post["difficulty"].values[..., None, :]

    def rates():
        return departures.pair_rates(post, ability, design, np.random.default_rng(11))

    for values in (departures.RATE_VALUES, 1):
        monkeypatch.setattr(departures, "RATE_VALUES", values)
        p = rates()
        np.testing.assert_array_equal(p, rates())
        departure = special.logit(p) - eta
        ran = departure[..., layout.pair_agent, design.pair_task] / post["cell_z"].values
        assert np.all(np.isclose(ran, 0.8) | np.isclose(ran, 2.4))
        fresh = departure[..., 0, 2].ravel()  # agent a never ran task t2
        variance = 0.8 * 0.8**2 + 0.2 * 2.4**2
        kurtosis = 3 * (0.8 * 0.8**4 + 0.2 * 2.4**4) / variance**2
        assert abs(fresh.mean()) < 4 * math.sqrt(variance / fresh.size)
        # the sample variance's relative standard error is sqrt((kurtosis - 1) / n)
        spread = 4 * math.sqrt((kurtosis - 1) / fresh.size)
        assert fresh.var() == pytest.approx(variance, rel=spread)
        assert len(np.unique(fresh)) == fresh.size


def _mixture_cdf(departure, eta, k, n, narrow, wide, share):
    """The conditional CDF of a run pair's departure ``d`` at ``departure`` given its
    additive logit ``eta`` per draw: ``(1 - share) N(d; 0, narrow) + share N(d; 0, wide)``
    times the binomial likelihood of ``k`` of ``n`` at ``eta + d``, integrated on a grid."""
    grid = np.linspace(-14.0, 14.0, 2801)
    x = eta[:, None] + grid[None, :]
    log_like = k * -np.logaddexp(0.0, -x) + (n - k) * -np.logaddexp(0.0, x)
    prior = (1 - share) * stats.norm.pdf(grid, 0, narrow) + share * stats.norm.pdf(grid, 0, wide)
    density = np.exp(log_like - log_like.max(axis=1, keepdims=True)) * prior
    cdf = integrate.cumulative_trapezoid(density, grid, axis=1, initial=0.0)
    cdf /= cdf[:, -1:]
    return np.array([np.interp(d, grid, row) for d, row in zip(departure, cdf, strict=True)])


def test_a_fit_without_departures_draws_each_from_its_conditional(monkeypatch):
    """A fit that keeps no ``cell_z`` (``redraw``): each run pair's departure, drawn again
    from its conditional given the draw, the same numbers in blocks of any size; its
    probability integral transform under the two-normal mixture times the pair's binomial
    likelihood (a grid's integral, per draw) is uniform for every pair, 0 of 8 and 8 of 8
    included; a pair never run departs by the mixture itself."""

    from bayes_eval.crossed import departures

    chains, draws = 2, 1500
    rng = np.random.default_rng(5)
    post, ability, design = _two_agents_three_tasks(rng, chains, draws, [3, 0, 1, 8], [8, 8, 2, 8])
    layout = design.layout
    eta = ability[..., :, None] - post["difficulty"].values[..., None, :]

    def rates():
        return departures.pair_rates(post, ability, design, np.random.default_rng(11))

    p = rates()
    np.testing.assert_array_equal(rates(), p)
    monkeypatch.setattr(departures, "RATE_VALUES", 1)  # a run pair's own numbers, any block
    ran = (..., layout.pair_agent, design.pair_task)
    np.testing.assert_array_equal(rates()[ran], p[ran])
    departure = special.logit(p) - eta
    for i, (a, t) in enumerate(zip(layout.pair_agent, design.pair_task, strict=True)):
        pit = _mixture_cdf(
            departure[..., a, t].ravel(),
            eta[..., a, t].ravel(),
            layout.e2e_k[i],
            layout.e2e_n[i],
            0.8,
            2.4,
            0.2,
        )
        assert stats.kstest(pit, "uniform").pvalue > 1e-3, (a, t)
    fresh = departure[..., 0, 2].ravel()  # agent a never ran task t2
    mixture = lambda d: 0.8 * stats.norm.cdf(d, 0, 0.8) + 0.2 * stats.norm.cdf(d, 0, 2.4)  # noqa: E731
    assert stats.kstest(fresh, mixture).pvalue > 1e-3


def test_the_compiled_redraw_gives_each_component_its_share():
    """One pair (30 of 59 runs, scales 4 and 14.8, 5% surprising), 100,000 draws: the share
    drawn wide is the wide component's mass (a grid's integral) within 4 standard errors,
    and the draws follow the mixture's CDF."""
    from bayes_eval.crossed.redraw import redraw

    size, eta, k, n, share = 100_000, -1.0, 30.0, 59.0, 0.05
    z, wide = redraw(
        np.full((size, 1), eta),
        (np.full(size, 4.0), np.full(size, 14.8)),
        (np.full(size, np.log1p(-share)), np.full(size, np.log(share))),
        (np.array([k]), np.array([n])),
        np.arange(size),
        3,
    )
    grid = np.linspace(-30.0, 30.0, 600_001)

    def part(scale, weight):
        x = eta + scale * grid
        log = (
            np.log(weight) - 0.5 * grid**2 - k * np.logaddexp(0, -x) - (n - k) * np.logaddexp(0, x)
        )
        return np.exp(log + 40.0)

    narrow_part, wide_part = part(4.0, 1 - share), part(14.8, share)
    expected = wide_part.sum() / (narrow_part.sum() + wide_part.sum())
    assert abs(wide.mean() - expected) < 4 * math.sqrt(expected * (1 - expected) / size)
    cdf = np.cumsum(narrow_part + wide_part)
    cdf /= cdf[-1]
    assert stats.kstest(z[:, 0], lambda x: np.interp(x, grid, cdf)).pvalue > 1e-3
