"""The safety report: same numbers as `fit`, offline HTML, verdicts that never overclaim."""

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bayes_eval
from bayes_eval.checks.fitted import check_fit
from bayes_eval.cli.main import main
from bayes_eval.messages import collected
from bayes_eval.outputs.report import build_report
from bayes_eval.outputs.verdicts import (
    ABOVE,
    BELOW,
    UNDECIDED,
    UNRELIABLE,
    VERDICT_COLUMNS,
    verdicts,
)
from bayes_eval.resources import example_evidence
from bayes_eval.results.summary import format_number

EXAMPLE = str(example_evidence())
PLANNING = Path(__file__).resolve().parents[1] / "docs" / "planning.md"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def embedded_summary(html: str) -> list:
    """The summary embedded in a report, as records (each provenance stored once)."""
    match = re.search(r'<script type="application/json" id="summary-data">(.*?)</script>', html)
    data = json.loads(match.group(1).replace("<\\/", "</"))
    records = [dict(zip(data["columns"], row, strict=True)) for row in data["data"]]
    return [{**r, "provenance": data["provenance"][r["provenance"]]} for r in records]


def test_report_numbers_equal_fit_json(capsys, tmp_path):
    args = ["--threshold", "0.05", "--seed", "3"]
    assert main(["fit", EXAMPLE, *args, "--format", "json"]) == 0
    fitted = json.loads(capsys.readouterr().out)
    assert main(["report", EXAMPLE, *args, "--out", str(tmp_path / "r")]) == 0
    html = (tmp_path / "r" / "report.html").read_text()
    assert embedded_summary(html) == fitted
    markdown = (tmp_path / "r" / "report.md").read_text()
    table = posterior_table(markdown)
    for record, row in zip(fitted, table, strict=True):
        assert (row["agent"], row["task"], row["method"]) == (
            record["agent"],
            record["task"],
            record["method"],
        )
        if record["upper"] is not None:
            assert float(row["upper (0.975)"]) == pytest.approx(record["upper"], rel=1e-3)


def posterior_table(markdown: str) -> list[dict]:
    """The rows of the Markdown's estimates table (the one with an ``estimate`` column)."""
    blocks = re.findall(r"((?:^\|.*\n)+)", markdown, flags=re.MULTILINE)
    lines = next(b for b in blocks if "estimate (mean)" in b).splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    return [
        dict(zip(header, [c.strip() for c in r.strip("|").split("|")], strict=True))
        for r in lines[2:]
    ]


class Resources(HTMLParser):
    """Every src and href in a page."""

    def __init__(self):
        super().__init__()
        self.links = []

    def handle_starttag(self, tag, attrs):
        self.links += [value for name, value in attrs if name in ("src", "href")]


def test_fit_out_with_a_threshold_writes_the_report(capsys, tmp_path):
    assert main(["fit", EXAMPLE, "--threshold", "0.05", "--out", str(tmp_path / "r")]) == 0
    written = {p.name for p in (tmp_path / "r").iterdir()}
    assert {"posterior.nc", "summary.csv", "report.html", "report.md"} <= written
    assert main(["fit", EXAMPLE, "--out", str(tmp_path / "s")]) == 0
    assert "report.html" not in {p.name for p in (tmp_path / "s").iterdir()}


def test_html_is_self_contained(tmp_path):
    result = bayes_eval.report(EXAMPLE, 0.05, out=tmp_path / "r")
    parser = Resources()
    parser.feed(result.html)
    assert parser.links and all(link.startswith("data:image/png;base64,") for link in parser.links)
    assert len(parser.links) == len(result.figures) == 4  # forest, densities, ppc, deployment
    assert "deployment.png" in result.figures
    assert "Methods, their assumptions and failure modes" in result.markdown
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == sorted(
        ["report.html", "report.md", "verdicts.csv", *result.figures]
    )
    written = pd.read_csv(tmp_path / "r" / "verdicts.csv", keep_default_na=False)
    assert list(written.columns) == list(VERDICT_COLUMNS)
    assert written[["agent", "task", "verdict"]].equals(
        result.table[["agent", "task", "verdict"]].reset_index(drop=True)
    )
    assert set(written["basis"]) == {"own"}  # an exact model borrows nothing


def test_a_report_of_point_values_only_is_written(tmp_path):
    """No estimate has a posterior (best-of-N only): the density figure says so."""
    evidence = pd.DataFrame(
        dict(task="t", method="expert_best_of_n", step=[1, 2], chosen_index=[3, 1])
    )
    result = bayes_eval.report(evidence, 0.05, out=tmp_path / "r")
    assert set(result.figures) == {"forest.png", "densities.png"}
    assert result.table["verdict"].tolist() == [UNDECIDED]
    assert result.table["sentence"].iloc[0].endswith("no credible bound; undecided at τ = 5%.")


def test_a_lower_bound_of_zero_does_not_stretch_the_probability_axis():
    """A task perhaps never solved has a lower bound of 0 (log10 -inf, floored at -300):
    the axis spans the positive values, 5% of their span beside them."""
    from bayes_eval.outputs.plots import axis_limits

    assert axis_limits([1e-3, 0.5, np.nan]) is None  # nothing at 0: ArviZ's own axis
    low, high = axis_limits([0.0, 1e-3, 0.2, 0.5, np.nan])
    span = np.log10(0.5) + 3  # from 1e-3 to 0.5 in decades
    assert low == pytest.approx(-3 - 0.05 * span)
    assert high == pytest.approx(np.log10(0.5) + 0.05 * span)


def test_a_long_forest_draws_the_highest_bounds_in_the_tables_order():
    """Of more rows than a figure can hold, the forest keeps those with the highest upper
    bounds (a point value by its value; no estimate last), in the summary's order."""
    from bayes_eval.outputs.plots import highest_rows

    summary = pd.DataFrame(
        {
            "task": list("abcdef"),
            "upper": [0.2, np.nan, 0.9, np.nan, 0.5, 0.1],
            "mean": [0.1, 0.7, 0.6, np.nan, 0.3, 0.05],  # b: a point value of 0.7
        },
        index=[10, 11, 12, 13, 14, 15],
    )
    assert highest_rows(summary, 3)["task"].tolist() == ["b", "c", "e"]
    assert highest_rows(summary, 5)["task"].tolist() == ["a", "b", "c", "e", "f"]
    assert highest_rows(summary, 6)["task"].tolist() == list("abcdef")


def test_a_long_forest_draws_per_agent_the_pairs_nearest_the_threshold_on_each_side():
    """At threshold 0.01 (log10 -2): agent x's bounds lie 0.3, 1, 0.5 and 2 decades above
    it and 0.7 and 3 below; y's only above. Of 6 rows for 2 agents (one per side each),
    x keeps its nearest above (c, 0.3) and below (e, 0.7), y its nearest above (h); a
    point value counts by its value (h), a pair without an estimate not at all (i).
    Of 2 rows, the nearest of all: c and h (0.3 decades each), x's first."""
    from bayes_eval.outputs.plots import nearest_rows

    summary = pd.DataFrame(
        {
            "agent": ["x"] * 6 + ["y"] * 3,
            "task": list("abcdefghi"),
            "upper": [1, 0.1, 10**-1.7, 10**-1.5, 10**-2.7, 1e-5, 0.5, np.nan, np.nan],
            "mean": [0.5, 0.05, 0.01, 0.01, 1e-3, 1e-6, 0.2, 10**-1.7, np.nan],
        }
    )
    assert nearest_rows(summary, 0.01, 6)["task"].tolist() == ["c", "e", "h"]
    assert nearest_rows(summary, 0.01, 2)["task"].tolist() == ["c", "h"]
    # two a side for one agent: by bound, highest first
    assert nearest_rows(summary[summary.agent == "x"], 0.01, 4)["task"].tolist() == list("dcef")


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium not installed")
def test_renders_in_headless_chromium_without_network(tmp_path):
    """Chromium, with the network blocked, parses every table and every figure of the
    report (each embedded PNG decodes to an image of its own size), and draws it at
    1280 px and at a phone's 390 px (a screenshot with content, not a blank page)."""
    import base64
    import io

    from matplotlib import image

    from tests.browser import Browser

    result = bayes_eval.report(EXAMPLE, 0.05, out=tmp_path / "r")
    with Browser(CHROMIUM, (tmp_path / "r" / "report.html").as_uri()) as page:
        dom = page.evaluate("document.documentElement.outerHTML")
        drawn = page.evaluate(
            "Array.from(document.images).map(i => [i.src, i.naturalWidth, i.naturalHeight])"
        )
        for width in (1280, 390):
            page.resize(width, 2400)
            page.screenshot(tmp_path / f"shot{width}.png")
    tables = result.markdown.count("\n|---")
    assert "Safety report" in dom and dom.count("<table") == tables >= 3
    sources = re.findall(r'<img alt="[^"]*" src="data:image/png;base64,([^"]+)"', dom)
    assert len(sources) == len(result.figures) == 4  # forest, densities, ppc, deployment
    assert sorted(base64.b64decode(data) for data in sources) == sorted(result.figures.values())
    assert len(drawn) == len(sources)
    for source, width, height in drawn:  # decoded by Chromium at the PNG's own size
        png = base64.b64decode(source.split(",", 1)[1])
        assert image.imread(io.BytesIO(png)).shape[:2] == (height, width)
        assert height > 100 and width > 100
    for width in (1280, 390):
        pixels = image.imread(tmp_path / f"shot{width}.png")
        assert pixels.shape[1] == width and len(np.unique(pixels.reshape(-1, 4), axis=0)) > 50


def ragged_table(agents: int, tasks: int, seed: int) -> pd.DataFrame:
    """End-to-end counts of ``agents`` x ``tasks`` pairs as real benchmarks have them:
    1 to 12 runs a pair (most 1 to 3), rates from 1e-4 to 0.9 on a logit scale, many
    pairs without a success."""
    rng = np.random.default_rng(seed)
    ability = rng.normal(0, 1.5, agents)[:, None]
    difficulty = rng.normal(2.5, 2.0, tasks)[None, :]
    rate = 1 / (1 + np.exp(difficulty - ability))
    trials = rng.choice([1, 1, 2, 3, 5, 12], size=rate.shape)
    return pd.DataFrame(
        {
            "agent": np.repeat([f"agent-{a:02d}" for a in range(agents)], tasks),
            "task": np.tile([f"task-{t:02d}" for t in range(tasks)], agents),
            "method": "end_to_end",
            "successes": rng.binomial(trials, rate).ravel(),
            "trials": trials.ravel(),
        }
    )


@pytest.fixture(scope="module")
def thousand_pairs(tmp_path_factory):
    """The report of 1,000 pairs (40 agents x 25 tasks, default model), written."""
    out = tmp_path_factory.mktemp("thousand") / "r"
    result = bayes_eval.report(ragged_table(40, 25, seed=7), 0.05, out=out)
    return result, out


def test_a_report_of_a_thousand_pairs_stays_small_and_decision_first(thousand_pairs):
    """At 1,000 pairs the page stays under 1.5 MB, and the decision (verdicts, then each
    agent's counts and nearest pairs) comes before the table of pairs; the agents are in
    the order of their estimated capability (exact fit: mean of their estimates)."""
    result, out = thousand_pairs
    page = (out / "report.html").read_text()
    assert len(page.encode()) < 1.5e6
    assert (
        page.index("Verdicts at 0.05")
        < page.index("Decision per agent")
        < page.index('<div class="pairs">')
    )
    table = result.table
    means = table.groupby("agent")["mean"].mean().sort_values(ascending=False)
    decision = re.search(r"<h2>Decision per agent</h2>.*?<tbody>(.*?)</tbody>", page, re.S)
    agents = re.findall(r"<tr><td>([^<]*)</td>", decision.group(1))
    assert agents == list(means.index)
    below = table[table["upper"] < 0.05]
    for agent, rows in below.groupby("agent"):  # the nearest below: its highest bound
        nearest = rows.loc[rows["upper"].idxmax(), "task"]
        row = decision.group(1).split(f"<tr><td>{agent}</td>")[1].split("</tr>")[0]
        assert f"<td>{nearest}: " in row


def test_the_provenance_names_fifty_pairs_and_counts_the_rest(thousand_pairs):
    """Each distinct provenance once: the pairs that share it named up to 50, the others
    counted, so that every pair is accounted for once and the section does not grow with
    a programme's pairs."""
    result, out = thousand_pairs
    markdown = (out / "report.md").read_text()
    section = markdown.split("## Provenance\n")[1].split("\n## ")[0]
    items = [line[2:] for line in section.splitlines() if line.startswith("- ")]
    counts = result.table["provenance"].value_counts()
    assert len(items) == len(counts) and counts.max() > 50
    accounted = 0
    for item in items:
        text = next(t for t in counts.index if item.endswith(f": {t}"))
        named = item[: -len(text) - 2]
        more = re.search(r" and ([\d,]+) more pairs \(summary.csv names each pair's\)$", named)
        names = named[: more.start()] if more else named
        assert len(names.split(", ")) == min(counts[text], 50)
        accounted += len(names.split(", ")) + (int(more.group(1).replace(",", "")) if more else 0)
        assert (more is not None) == (counts[text] > 50)
    assert accounted == len(result.table)


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium not installed")
def test_the_table_of_a_thousand_pairs_sorts_filters_and_searches_in_chromium(
    thousand_pairs, tmp_path
):
    """Driven in Chromium as a reader would (clicks, choices, typing), with the network
    blocked: the rows shown after each step are the summary's rows that step selects,
    checked against pandas; a row's sentence opens on a click."""
    from tests.browser import Browser

    result, out = thousand_pairs
    table = result.table
    rows = "Array.from(document.querySelectorAll('.pairs tbody tr')).filter(r => !r.hidden)"
    cells = f"{rows}.map(r => [r.cells[0].textContent, r.cells[1].textContent])"
    with Browser(CHROMIUM, (out / "report.html").as_uri()) as page:
        page.evaluate("window.pairsReady")
        assert page.evaluate(f"{rows}.length") == len(table) == 1000
        assert page.evaluate("document.querySelector('.pairs .count').textContent") == (
            "1000 of 1000 pairs shown"
        )
        # sort by the upper bound: a click goes up, a second comes down
        head = "Array.from(document.querySelectorAll('.pairs th')).find(h => "
        upper = f"{head}h.textContent.startsWith('upper'))"
        page.evaluate(f"{upper}.click()")
        ascending = table.sort_values("upper", kind="stable")
        assert [tuple(r) for r in page.evaluate(cells)[:5]] == list(
            zip(ascending["agent"].head(5), ascending["task"].head(5), strict=True)
        )
        page.evaluate(f"{upper}.click()")
        column = page.evaluate(
            f"Array.from(document.querySelectorAll('.pairs th')).indexOf({upper})"
        )
        shown = page.evaluate(f"{rows}.map(r => Number(r.cells[{column}].dataset.value))")
        assert shown == sorted(shown, reverse=True) and shown[0] == pytest.approx(
            table["upper"].max(), rel=1e-5
        )
        # filter by agent and verdict
        pick = "document.querySelector('.pairs select[aria-label={}]')"
        choose = "(s => {{ s.value = {value!r}; s.dispatchEvent(new Event('change')); }})({s})"
        agent = table.loc[table["verdict"] == ABOVE, "agent"].iloc[0]
        page.evaluate(choose.format(value=agent, s=pick.format("agent")))
        page.evaluate(choose.format(value=ABOVE, s=pick.format("verdict")))
        expected = table[(table["agent"] == agent) & (table["verdict"] == ABOVE)]
        assert 0 < len(expected) < (table["agent"] == agent).sum()
        assert sorted(map(tuple, page.evaluate(cells))) == sorted(
            zip(expected["agent"], expected["task"], strict=True)
        )
        # search, with the filters cleared: every row whose text holds the words
        page.evaluate(choose.format(value="", s=pick.format("agent")))
        page.evaluate(choose.format(value="", s=pick.format("verdict")))
        search = "(i => { i.value = 'task-07'; i.dispatchEvent(new Event('input')); })"
        page.evaluate(f"{search}(document.querySelector('.pairs input'))")
        assert {t for _, t in page.evaluate(cells)} == {"task-07"}
        assert len(page.evaluate(cells)) == (table["task"] == "task-07").sum()
        # the first row's sentence, behind a click on why
        opened = (
            f"(r => {{ r.querySelector('summary').click(); "
            "return [r.querySelector('details').open, r.querySelector('details p').textContent]; "
            f"}})({rows}[0])"
        )
        is_open, text = page.evaluate(opened)
        first = page.evaluate(cells)[0]
        found = table[(table["agent"] == first[0]) & (table["task"] == first[1])]
        assert is_open and text == found["sentence"].iloc[0]
        page.screenshot(tmp_path / "filtered.png")
    assert (tmp_path / "filtered.png").stat().st_size > 10_000


def programme_pairs(agents: int, tasks: int, seed: int):
    """A pairs payload (``report._pairs``'s shape) of ``agents`` x ``tasks`` rows, with
    varied numbers and sentences, as a programme's report holds them."""
    rng = np.random.default_rng(seed)
    n = agents * tasks
    upper = np.where(rng.random(n) < 0.02, np.nan, rng.beta(0.5, 3, n))
    own_runs = rng.integers(1, 6, n).astype(float)
    numbers = pd.DataFrame({"upper (0.975)": upper, "own runs": own_runs})
    shown = pd.DataFrame(
        {
            "agent": np.repeat([f"agent-{a:03d}" for a in range(agents)], tasks),
            "task": np.tile([f"task-{t:03d}" for t in range(tasks)], agents),
            "verdict": rng.choice([BELOW, ABOVE, UNDECIDED, UNRELIABLE], n),
            "basis": rng.choice(["own", "pooled"], n),
            "upper (0.975)": [format_number(u) for u in upper],
            "own runs": [f"{r:,.0f}" for r in own_runs],
        }
    )
    shown["sentence"] = [
        f"{a}, {t}: at most {u:.2%} (97.5% credible); {v} on {r:.0f} runs."
        for a, t, u, v, r in zip(
            shown["agent"], shown["task"], upper, shown["verdict"], own_runs, strict=True
        )
    ]
    return shown, numbers


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium not installed")
def test_the_table_of_fifty_thousand_pairs_pages_sorts_filters_and_searches_in_chromium(
    tmp_path,
):
    """50,000 rows in a page that stays small: the first page written as HTML, every row
    in the compressed data; in Chromium the count, sorting, filters, search and paging
    reach every row, each checked against pandas."""
    from bayes_eval.outputs.pages import PAGE_ROWS, html_page
    from tests.browser import Browser

    shown, numbers = programme_pairs(100, 500, seed=3)
    summary = pd.DataFrame({"provenance": ["p"] * len(shown)})
    page_html = html_page([("pairs", (shown, numbers))], {}, summary)
    assert len(page_html.encode()) < 2e6
    assert page_html.count("<tr><td") == PAGE_ROWS  # the first page, as HTML
    assert "not embedded in this page" in page_html
    (tmp_path / "r.html").write_text(page_html)
    rows = "Array.from(document.querySelectorAll('.pairs tbody tr'))"
    cells = f"{rows}.map(r => [r.cells[0].textContent, r.cells[1].textContent])"
    text = "document.querySelector('.pairs {}').textContent"
    choose = "(s => {{ s.value = {value!r}; s.dispatchEvent(new Event('change')); }})({s})"
    pick = "document.querySelector('.pairs select[aria-label={}]')"
    pairs_of = lambda frame: list(zip(frame["agent"], frame["task"], strict=True))  # noqa: E731
    with Browser(CHROMIUM, (tmp_path / "r.html").as_uri()) as page:
        page.evaluate("window.pairsReady")
        assert page.evaluate(text.format(".count")) == "50000 of 50000 pairs shown"
        assert page.evaluate(text.format(".page")) == "page 1 of 50"
        assert [tuple(r) for r in page.evaluate(cells)] == pairs_of(shown.head(PAGE_ROWS))
        # sort by the bound, highest first (a pair without one last), and turn a page
        head = "Array.from(document.querySelectorAll('.pairs th')).find(h => "
        upper = f"{head}h.textContent.startsWith('upper'))"
        page.evaluate(f"{upper}.click()")
        page.evaluate(f"{upper}.click()")
        scroll = "document.querySelector('.pairs .scroll')"
        page.evaluate(f"{scroll}.scrollTop = 5000")
        assert page.evaluate(f"{scroll}.scrollTop") > 0
        page.evaluate("document.querySelectorAll('.pairs .paging button')[1].click()")
        assert page.evaluate(f"{scroll}.scrollTop") == 0  # a new page from its first row
        key = numbers["upper (0.975)"].map(lambda u: float(f"{u:.6g}"))
        descending = shown.assign(key=key).sort_values("key", ascending=False, kind="stable")
        assert page.evaluate(text.format(".page")) == "page 2 of 50"
        assert [tuple(r) for r in page.evaluate(cells)] == pairs_of(
            descending.iloc[PAGE_ROWS : 2 * PAGE_ROWS]
        )
        # filter by agent and verdict: the rows and the count, in the sorted order
        page.evaluate(choose.format(value="agent-042", s=pick.format("agent")))
        page.evaluate(choose.format(value=BELOW, s=pick.format("verdict")))
        chosen = descending[(descending["agent"] == "agent-042") & (descending["verdict"] == BELOW)]
        assert [tuple(r) for r in page.evaluate(cells)] == pairs_of(chosen)
        assert page.evaluate(text.format(".count")) == f"{len(chosen)} of 50000 pairs shown"
        # search every cell and the sentence, the filters cleared
        page.evaluate(choose.format(value="", s=pick.format("agent")))
        page.evaluate(choose.format(value="", s=pick.format("verdict")))
        words = "task-417: at most 1"
        page.evaluate(
            f"(i => {{ i.value = {words!r}; i.dispatchEvent(new Event('input')); }})"
            "(document.querySelector('.pairs input'))"
        )
        found = descending[descending["sentence"].str.lower().str.contains(words.lower())]
        assert 0 < len(found) < 100
        assert [tuple(r) for r in page.evaluate(cells)] == pairs_of(found)
        opened = (
            "(r => { r.querySelector('summary').click(); "
            f"return r.querySelector('details p').textContent; }})({rows}[0])"
        )
        assert page.evaluate(opened) == found["sentence"].iloc[0]


def test_verdict_rules():
    summary = pd.DataFrame(
        dict(
            agent="a",
            task=["ok", "failed", "contradicted", "high", "straddles", "point"],
            lower=[0.001, 0.001, 0.001, 0.1, 0.01, np.nan],
            upper=[0.01, 0.01, 0.01, 0.2, 0.2, np.nan],
            diagnostics_ok=pd.array([True, False, True, True, True, pd.NA], dtype="boolean"),
        )
    )
    assumption = pd.DataFrame(
        dict(agent=["a"], task=["contradicted"], doubtful=[True], p_value=[0.001])
    )
    found = verdicts(summary.assign(method="milestone"), assumption, threshold=0.05)
    assert list(found["verdict"]) == [BELOW, UNRELIABLE, UNRELIABLE, ABOVE, UNDECIDED, UNDECIDED]
    assert list(found["reason"])[1:3] == [
        "the MCMC diagnostics failed",
        "its end-to-end runs contradict its milestones (milestone-assumption check p = 0.001)",
    ]
    # Under a model that accounts for other paths the check marks nothing (it is not
    # doubtful there); the fit's own predictive check of the end-to-end counts does.
    paths = summary.assign(method="joint")
    accounted = assumption.assign(doubtful=False)
    checks = pd.DataFrame(
        dict(
            agent="a",
            task=["ok", "high"],
            evidence="end_to_end",
            flagged=[True, False],
            successes=[9, 1],
            trials=[10, 10],
            p_value=[0.004, 0.5],
        )
    )
    found = verdicts(paths, accounted, threshold=0.05, checks=checks)
    assert list(found["verdict"]) == [UNRELIABLE, UNRELIABLE, BELOW, ABOVE, UNDECIDED, UNDECIDED]
    assert found["reason"].iloc[0] == (
        "the fit's posterior predictive check flags its end-to-end count (9/10, p = 0.004)"
    )
    # ... and a flagged milestone cell does not.
    milestone_flag = checks.assign(evidence="milestone")
    found = verdicts(paths, accounted, threshold=0.05, checks=milestone_flag)
    assert list(found["verdict"]) == [BELOW, UNRELIABLE, BELOW, ABOVE, UNDECIDED, UNDECIDED]


def test_every_row_has_one_sentence_and_each_agent_a_decision():
    """On the shipped example: a verdict from the documented set and one sentence per
    row, an undecided row says how many trials would decide it (the planner's number),
    and the roll-up counts each agent's verdicts and names its highest upper bound."""
    from bayes_eval.outputs.verdicts import VERDICTS, rollup
    from bayes_eval.plan import trials_to_decide

    result = bayes_eval.report(EXAMPLE, 0.05)
    table = result.table
    assert set(table["verdict"]) <= set(VERDICTS)
    assert table["sentence"].str.count(r"\.$").eq(1).all()
    assert not table["sentence"].str.contains("not shown").any()
    undecided = table[(table["verdict"] == UNDECIDED) & table["upper"].notna()].iloc[0]
    trials = trials_to_decide(undecided["mean"], undecided["sd"], 0.05, undecided["level"])
    assert f"about {float(f'{trials:.2g}'):,.0f} more end-to-end trials" in undecided["sentence"]
    roll = rollup(table, 0.05).set_index("agent")
    for agent, rows in table.groupby("agent"):  # an exact fit's verdicts are all its own
        assert roll.loc[agent, list(VERDICTS)].astype(int).sum() == len(rows)
        above = rows[rows["upper"] >= 0.05]
        nearest = above.loc[above["upper"].idxmin()]
        assert roll.loc[agent, "nearest above 0.05"].startswith(f"{nearest['task']}: ")
    assert "Decision per agent" in result.markdown and undecided["sentence"] in result.markdown


def test_contradicted_milestones_are_never_below_threshold():
    # Milestones say P is about 0.01; 30 of 40 end-to-end runs say otherwise.
    frame = pd.DataFrame(
        [
            dict(task="t", method="milestone", step=1, successes=10, trials=100),
            dict(task="t", method="milestone", step=2, successes=10, trials=100),
            dict(task="t", method="end_to_end", successes=30, trials=40),
        ]
    )
    posterior = bayes_eval.fit(frame, "mats2024")
    assert posterior.summary()["upper"].iloc[0] < 0.05
    result = build_report(posterior, 0.05, checks=check_fit(posterior))
    assert result.table["verdict"].iloc[0] == UNRELIABLE
    assert "contradicted" in result.table["milestone_check"].iloc[0]


def test_bad_report_arguments(capsys, tmp_path):
    assert main(["report", EXAMPLE, "--threshold", "0.05"]) == 2
    assert "--out" in capsys.readouterr().err
    assert main(["report", EXAMPLE, "--threshold", "1.2", "--out", str(tmp_path / "r")]) == 2
    assert "--threshold: 1.2 must lie strictly" in capsys.readouterr().err
    assert main(["report", EXAMPLE, "--threshold", "0.05", "--basis", "x", "--out", "r"]) == 2
    assert "--basis: invalid choice: 'x' (choose from 'model', 'own')" in capsys.readouterr().err
    with pytest.raises(bayes_eval.InputError, match="basis: 'x' is not one of model, own"):
        bayes_eval.report(EXAMPLE, 0.05, basis="x")
    assert not (tmp_path / "r").exists()


def test_the_docs_worked_example_runs(tmp_path, monkeypatch):
    text = PLANNING.read_text()
    block = text.split("## Worked example", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(block, "docs/planning.md worked example", "exec"), namespace)
    table = namespace["result"].table
    assert ((table["upper"] < 0.05) == (table["verdict"] == "below threshold")).all()
    html = (tmp_path / "report" / "report.html").read_text()
    assert all(task in html for task in table["task"])
    n = namespace["bayes_eval"].plan_zero_success(0.01, 0.975)  # 367, as the comment says
    assert n == 367 and 1 - 0.025 ** (1 / 368) <= 0.01 < 1 - 0.025 ** (1 / 367)


def test_milestone_method_beside_the_model_and_the_check_in_words():
    """The milestone method's bound (a mats2024 fit of the same evidence) beside this
    model's, with the reason; none beside the milestone method itself. A task with no
    end-to-end success is 'not informative' in the check, never 'consistent'."""
    from bayes_eval.outputs.comparisons import milestone_comparison

    result = bayes_eval.report(EXAMPLE, 0.05)
    posterior = bayes_eval.fit(EXAMPLE)
    milestones = check_fit(posterior).milestone_method
    compared = milestone_comparison(posterior, result.table, 0.975, milestones)
    with collected():
        mats = bayes_eval.fit(EXAMPLE, "mats2024").summary().set_index(["agent", "task"])
    assert len(compared) == len(mats)
    for row in compared.to_dict("records"):
        upper = mats.loc[(row["agent"], row["task"]), "upper"]
        assert float(row["milestone method upper (0.975)"]) == pytest.approx(upper, rel=1e-3)
        assert row["why they differ"].startswith("the chain rests each task")
    assert "The milestone method beside this model" in result.markdown
    with collected() as notes:
        own = bayes_eval.report(EXAMPLE, 0.05, model="mats2024")
    assert any("left out 2 task" in note for note in notes)  # the tasks without milestones
    assert "The milestone method beside this model" not in own.markdown
    checks = result.table.set_index(["agent", "task"])["milestone_check"]
    assert checks[("agent-b", "credential_harvest")] == "not informative: 0 end-to-end successes"
    assert checks[("agent-a", "data_exfiltration")] == "not applicable: no milestone runs"
    assert "0/30 end-to-end successes; not informative" in result.markdown


def test_sentences_never_round_a_bound_to_certainty():
    """Shares near 1 keep the figures of their distance to 100%; an undecided row without
    spread gets no number of trials, and one beyond the planner's limit says so."""
    from types import SimpleNamespace

    from bayes_eval.outputs.verdicts import _share, sentence

    assert [_share(v) for v in (0.9999, 0.997, 0.5, 0.0123, 3e-5)] == [
        "99.99%",
        "99.7%",
        "50%",
        "1.2%",
        "3e-05",
    ]
    row = SimpleNamespace(
        agent="a",
        task="t",
        upper=0.3,
        lower=0.01,
        mean=0.1,
        sd=0.0,
        verdict=UNDECIDED,
        reason="",
    )
    text = "a, t: at most 30% (97.5% credible), estimate 10%; undecided at τ = 5%"
    assert sentence(row, 0.05, 0.975) == f"{text}."
    # a posterior centred on the threshold, sd 0.001: telling P from 5% takes a posterior
    # sd well below 0.001, about 0.05 x 0.95 / 0.0005^2 = 190,000 trials
    row.mean, row.sd, row.upper, row.lower = 0.05, 0.001, 0.052, 0.048
    assert sentence(row, 0.05, 0.975) == (
        "a, t: at most 5.2% (97.5% credible), estimate 5%; undecided at τ = 5%: more "
        "than 100,000 more end-to-end trials would be needed to decide it."
    )


def test_the_report_says_which_model_its_bounds_come_from(tmp_path, capsys):
    """``compare`` fits more models to the same evidence; the section ranks those that
    share counts with the report's model as ``bayes_eval.compare`` does (exact LOO here:
    ``mats2024``'s uniform milestone prior against a Beta(2, 2) one), and names those that
    share none (an end-to-end model; Haldane's prior, which predicts no count unseen)."""
    from bayes_eval.checks.comparison import compare

    text = (Path(bayes_eval.__file__).parents[1] / "models" / "mats2024.toml").read_text()
    beta22 = tmp_path / "beta22.toml"
    beta22.write_text(
        text.replace('name = "mats2024"', 'name = "beta22"').replace(
            "alpha = 1.0\nbeta = 1.0", "alpha = 2.0\nbeta = 2.0"
        )
    )
    others = [str(beta22), "phuong2024", "end_to_end"]
    with collected():
        result = bayes_eval.report(EXAMPLE, 0.05, model="mats2024", compare=others)
        fits = {
            name: bayes_eval.fit(EXAMPLE, spec)
            for name, spec in (("mats2024", "mats2024"), ("beta22", str(beta22)))
        }
    expected = compare(fits).table
    section = result.markdown.split("## Which model the bounds come from", 1)[1]
    section = section.split("\n## ", 1)[0]
    assert "This report's bounds are mats2024's." in section
    rows = [line.strip("|").split(" | ") for line in section.splitlines()]
    rows = [row for row in rows if row[0].strip() in expected.index]
    assert [row[0].strip() for row in rows] == list(expected.index)
    for name, elpd, *_ in rows:
        assert float(elpd) == pytest.approx(expected.at[name.strip(), "elpd"], abs=0.05)
    for name in ("phuong2024", "end_to_end"):
        assert f"{name} explains no observed count that mats2024 explains" in section
    out = str(tmp_path / "r")
    assert main(["report", EXAMPLE, "--threshold", "0.05", "--out", out, "--compare", "x"]) == 2
    assert "--compare: x: no such model" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_a_report_with_nothing_to_rank_says_why():
    with collected():
        result = bayes_eval.report(EXAMPLE, 0.05, model="end_to_end")
    section = result.markdown.split("## Which model the bounds come from", 1)[1]
    assert "No other model could be ranked beside it by leaving one cell out: mats2024" in section
    assert "--holdout end_to_end" in section
