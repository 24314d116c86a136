"""The report's sections as Markdown and as one self-contained HTML page.

A section is a ``(kind, payload)`` pair: ``h1``, ``h2`` and ``p`` (text; ``**title.**``
opens a paragraph in bold), ``list`` (strings), ``table`` and ``figure`` (a PNG's name and
its caption). ``pairs`` is the table of every pair, its last column (``sentence``) each
pair's verdict in words: in Markdown, the table and then the sentences; in HTML, one table
that sorts (a click on a column's head), filters (by agent, verdict and basis) and
searches (every cell and the sentence) in the browser over every row, shown a page of
``PAGE_ROWS`` at a time, with its sentence behind a click on the row's ``why``. Its rows
travel compressed in the page (an exact fit's 50,063 pairs in 0.75 MB); the page runs a
few lines of inline script, needs no network and no server, and reads without the script
(the first page of rows, in the report's order).
"""

from __future__ import annotations

import base64
import gzip
import html
import json

import pandas as pd

__all__ = ["html_page", "markdown"]

# The pairs table's filters: the columns a reader picks values of.
FILTERED = ("agent", "verdict", "basis")
# Rows of the pairs table on one page: the first page is also written as HTML, for a
# reader without script; every row is in the table's data (``_pairs_data``).
PAGE_ROWS = 1000
# Pairs whose summary is embedded in the page whole (``summary_json``); beyond, it would
# pass a page of 3 MB (50,000 pairs of a crossed fit: about 6 MB even compressed).
EMBEDDED_SUMMARY_ROWS = 5000
# The pairs table in the browser: its data (gzip, then base64: ``_pairs_data``) decoded
# once; filters, search and sorting over every row, and a page of ``PAGE_ROWS`` shown.
# ``window.pairsReady`` resolves when every table is drawn.
SCRIPT = """
const escapes = {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#x27;'};
const escaped = text => String(text).replace(/[&<>"']/g, c => escapes[c]);
async function decoded(source) {
  const bytes = Uint8Array.from(atob(source.textContent.trim()), c => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  return JSON.parse(await new Response(stream).text());
}
async function pairs(box) {
  const data = await decoded(box.querySelector('script.pairs-data'));
  const table = box.querySelector('table'), body = table.tBodies[0];
  const heads = Array.from(table.tHead.querySelectorAll('th'));
  const search = box.querySelector('input'), count = box.querySelector('.count');
  const picks = Array.from(box.querySelectorAll('select'));
  const [back, next] = box.querySelectorAll('.paging button'), where = box.querySelector('.page');
  const size = data.page, total = data.sentences.length, columns = data.columns;
  const text = (c, n) => c === 'why' ? data.sentences[n] : data.cells[c][n];
  let haystack = null, rows = [], page = 0, sorted = Array.from({length: total}, (_, n) => n);
  const value = (c, n) => data.sort[c][n] === null ? 'NaN' : data.sort[c][n];
  const cell = (c, n) => c === 'why'
    ? `<td><details><summary>why</summary><p>${escaped(data.sentences[n])}</p></details></td>`
    : c in data.sort
      ? `<td data-value="${value(c, n)}">${escaped(text(c, n))}</td>`
      : `<td>${escaped(text(c, n))}</td>`;
  const draw = () => {
    const pages = Math.max(1, Math.ceil(rows.length / size));
    page = Math.min(page, pages - 1);
    const shown = rows.slice(page * size, (page + 1) * size);
    body.innerHTML = shown.map(n => `<tr>${columns.map(c => cell(c, n)).join('')}</tr>`).join('');
    table.parentElement.scrollTop = 0;  // a new page from its first row
    count.textContent = `${rows.length} of ${total} pairs shown`;
    where.textContent = `page ${page + 1} of ${pages}`;
    back.disabled = page === 0;
    next.disabled = page >= pages - 1;
    where.parentElement.hidden = pages === 1;
  };
  const show = () => {
    const words = search.value.toLowerCase();
    const wordsOf = n => columns.map(c => text(c, n)).join(' ').toLowerCase();
    if (words && haystack === null) haystack = Array.from({length: total}, (_, n) => wordsOf(n));
    const chosen = picks.filter(p => p.value);
    rows = sorted.filter(n => chosen.every(p => data.cells[p.dataset.column][n] === p.value)
      && (!words || haystack[n].includes(words)));
    page = 0;
    draw();
  };
  const collator = new Intl.Collator();
  heads.forEach((head, i) => {
    head.tabIndex = 0;
    const column = columns[i];
    const sort = () => {
      const up = head.getAttribute('aria-sort') !== 'ascending';
      heads.forEach(h => h.removeAttribute('aria-sort'));
      head.setAttribute('aria-sort', up ? 'ascending' : 'descending');
      const sign = up ? 1 : -1, values = data.sort[column];
      sorted = Array.from({length: total}, (_, n) => n).sort(values
        ? (a, b) => {
            const x = values[a] ?? NaN, y = values[b] ?? NaN;
            return (isNaN(x) - isNaN(y)) || sign * (x - y) || a - b;
          }
        : (a, b) => sign * collator.compare(text(column, a), text(column, b)) || a - b);
      show();
    };
    head.addEventListener('click', sort);
    head.addEventListener('keydown', e => { if (e.key === 'Enter') sort(); });
  });
  back.addEventListener('click', () => { page -= 1; draw(); });
  next.addEventListener('click', () => { page += 1; draw(); });
  search.addEventListener('input', show);
  picks.forEach(p => p.addEventListener('change', show));
  show();
}
window.pairsReady = Promise.all(Array.from(document.querySelectorAll('.pairs'), pairs));
"""
STYLE = (
    "body{font-family:sans-serif;max-width:80em;margin:2em auto;padding:0 1em;"
    "line-height:1.4}.scroll{overflow-x:auto}"
    "table{border-collapse:collapse;font-size:90%}td,th{border:1px solid #bbb;"
    "padding:.2em .5em}img{max-width:100%}figcaption{font-size:90%;color:#444}"
    ".pairs th{cursor:pointer;position:sticky;top:0;background:#eee}"
    ".pairs th[aria-sort=ascending]::after{content:' ▲'}"
    ".pairs th[aria-sort=descending]::after{content:' ▼'}"
    ".pairs .scroll{max-height:40em;overflow-y:auto}.controls{display:flex;gap:.5em;"
    "flex-wrap:wrap;align-items:center}.controls input{min-width:16em}"
    ".paging{display:inline-flex;gap:.4em;align-items:center}"
    "details p{margin:.3em 0;min-width:22em;max-width:36em}"
)


def markdown(sections) -> str:
    """The sections as Markdown (figures linked by name)."""
    lines = []
    for kind, payload in sections:
        if kind == "h1":
            lines.append(f"# {payload}\n")
        elif kind == "h2":
            lines.append(f"## {payload}\n")
        elif kind == "p":
            lines.append(f"{payload}\n")
        elif kind == "list":
            lines.append(_markdown_list(payload))
        elif kind == "table":
            lines.append(_markdown_table(payload))
        elif kind == "pairs":
            shown = payload[0]
            lines.append(_markdown_table(shown.drop(columns="sentence")))
            lines.append(_markdown_list(shown["sentence"]))
        elif kind == "figure":
            name, caption = payload
            lines.append(f"![{caption}]({name})\n\n{caption}\n")
    return "\n".join(lines)


def _markdown_list(items) -> str:
    return "\n".join(f"- {item}" for item in items) + "\n"


def _markdown_table(frame: pd.DataFrame) -> str:
    header = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "---|" * len(frame.columns)
    body = ["| " + " | ".join(str(v) for v in row) + " |" for row in frame.values]
    return "\n".join([header, rule, *body]) + "\n"


def html_page(sections, figures: dict, summary: pd.DataFrame) -> str:
    """The sections as one HTML page: figures embedded, the pairs table interactive, and
    ``summary`` embedded as JSON (``summary_json``) where it has at most
    ``EMBEDDED_SUMMARY_ROWS`` rows; the page says where a larger one is."""
    whole = len(summary) <= EMBEDDED_SUMMARY_ROWS
    body = []
    for kind, payload in sections:
        if kind in ("h1", "h2"):
            body.append(f"<{kind}>{html.escape(payload)}</{kind}>")
        elif kind == "p":
            body.append(f"<p>{_bold(payload)}</p>")
        elif kind == "list":
            items = "".join(f"<li>{html.escape(item)}</li>" for item in payload)
            body.append(f"<ul>{items}</ul>")
        elif kind == "table":
            body.append(f'<div class="scroll">{_table_html(payload)}</div>')  # narrow screens
        elif kind == "pairs":
            body.append(_pairs_html(payload))
            if not whole:
                body.append(
                    f"<p>The summary's every column for these {len(summary):,} pairs is "
                    "not embedded in this page (it would pass 3 MB): summary.csv in the "
                    "fit's run folder holds it, as does fit with --format csv.</p>"
                )
        elif kind == "figure" and payload[0] in figures:
            name, caption = payload
            data = base64.b64encode(figures[name]).decode("ascii")
            body.append(
                f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
                f"<figcaption>{html.escape(caption)}</figcaption></figure>"
            )
    data = summary_json(summary if whole else summary.head(0)).replace("</", "<\\/")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>bayes_eval safety report</title><style>{STYLE}</style></head><body>\n"
        + "\n".join(body)
        + f'\n<script type="application/json" id="summary-data">{data}</script>\n'
        f"<script>{SCRIPT}</script>\n</body></html>\n"
    )


def summary_json(summary: pd.DataFrame) -> str:
    """``summary`` as JSON: ``columns``, ``data`` (one list per row, null for a missing
    value) and ``provenance``, each distinct provenance once (the rows' ``provenance``
    cell is its index there)."""
    texts = list(dict.fromkeys(summary["provenance"]))
    at = {text: n for n, text in enumerate(texts)}
    rows = summary.assign(provenance=summary["provenance"].map(at))
    data = [[None if pd.isna(v) else v for v in row] for row in rows.itertuples(index=False)]
    return json.dumps(
        {"columns": list(summary.columns), "data": data, "provenance": texts},
        default=_json_default,
    )


def _pairs_html(payload) -> str:
    """The pairs table with its search box, filters, count and pages (``SCRIPT``), its
    data (``_pairs_data``) and its first page as HTML; ``payload`` is the table shown and
    the values its numeric columns sort by."""
    frame, numbers = payload
    columns = [c for c in frame.columns if c != "sentence"]
    picks = []
    for name in FILTERED:
        if name in columns:
            options = "".join(
                f'<option value="{html.escape(v)}">{html.escape(v)}</option>'
                for v in dict.fromkeys(frame[name].astype(str))
            )
            picks.append(
                f'<select data-column="{name}" aria-label="{name}">'
                f'<option value="">every {name}</option>{options}</select>'
            )
    pages = max(1, -(-len(frame) // PAGE_ROWS))
    controls = (
        '<div class="controls"><input type="search" placeholder="search the pairs" '
        f'aria-label="search the pairs">{"".join(picks)}'
        f'<span class="count">{len(frame)} pairs</span><span class="paging">'
        '<button type="button">previous</button>'
        f'<span class="page">page 1 of {pages}</span><button type="button">next</button>'
        "</span></div>"
    )
    # why (the sentence, behind a click) beside the verdict and its basis
    at = max((columns.index(c) + 1 for c in FILTERED if c in columns), default=len(columns))
    order = [*columns[:at], "why", *columns[at:]]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in order)
    first = frame.head(PAGE_ROWS)
    cells = {
        c: [
            f'<td data-value="{_sort_value(v)}">{html.escape(str(t))}</td>'
            for v, t in zip(numbers[c].head(PAGE_ROWS), first[c], strict=True)
        ]
        if c in numbers
        else [f"<td>{html.escape(str(t))}</td>" for t in first[c]]
        for c in columns
    }
    cells["why"] = [
        f"<td><details><summary>why</summary><p>{html.escape(s)}</p></details></td>"
        for s in first["sentence"]
    ]
    rows = [f"<tr>{''.join(cells[c][n] for c in order)}</tr>" for n in range(len(first))]
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    rest = (
        f"<noscript><p>Without script, the first {len(first):,} of {len(frame):,} pairs are "
        "shown; verdicts.csv holds every one.</p></noscript>"
        if len(frame) > len(first)
        else ""
    )
    data = (
        '<script type="application/octet-stream" class="pairs-data" '
        f'data-encoding="gzip, base64">{_pairs_data(frame, numbers, order)}</script>'
    )
    return f'<div class="pairs">{controls}<div class="scroll">{table}</div>{rest}{data}</div>'


def _pairs_data(frame: pd.DataFrame, numbers: pd.DataFrame, order: list) -> str:
    """Every row of the pairs table, for its script: JSON of ``columns`` (in the order
    shown, ``why`` among them), ``cells`` (each column's texts), ``sort`` (each numeric
    column's values to six figures, null for none), ``sentences`` and ``page`` (rows a
    page), compressed by gzip (the same bytes every time) and written in base64."""
    data = {
        "columns": order,
        "cells": {c: frame[c].astype(str).tolist() for c in order if c != "why"},
        "sort": {
            c: [None if pd.isna(v) else float(f"{v:.6g}") for v in numbers[c]]
            for c in numbers
            if c in order
        },
        "sentences": frame["sentence"].astype(str).tolist(),
        "page": PAGE_ROWS,
    }
    text = json.dumps(data, separators=(",", ":"), default=_json_default)
    return base64.b64encode(gzip.compress(text.encode(), compresslevel=9, mtime=0)).decode()


def _table_html(frame: pd.DataFrame) -> str:
    """``frame`` as an HTML table, every cell escaped."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>"
        for row in frame.itertuples(index=False)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _sort_value(value) -> str:
    """A number for sorting, to six figures (``NaN`` for none)."""
    return "NaN" if pd.isna(value) else f"{float(value):.6g}"


def _bold(text: str) -> str:
    """``**title.** rest`` as HTML, everything escaped."""
    if text.startswith("**") and "**" in text[2:]:
        title, rest = text[2:].split("**", 1)
        return f"<strong>{html.escape(title)}</strong>{html.escape(rest)}"
    return html.escape(text)


def _json_default(value):
    return value.item() if hasattr(value, "item") else str(value)
