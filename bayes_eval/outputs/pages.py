"""The report's sections as Markdown and as one self-contained HTML page.

A section is a ``(kind, payload)`` pair: ``h1``, ``h2`` and ``p`` (text; ``**title.**``
opens a paragraph in bold), ``list`` (strings), ``table`` and ``figure`` (a PNG's name and
its caption). ``pairs`` is the table of every pair, its last column (``sentence``) each
pair's verdict in words: in Markdown, the table and then the sentences; in HTML, one table
that sorts (a click on a column's head), filters (by agent, verdict and basis) and
searches (every cell and the sentence) in the browser, with its sentence behind a click on
the row's ``why``. The page runs a few lines of inline script, needs no network and no
server, and reads without the script (every row shown, in the report's order).
"""

from __future__ import annotations

import base64
import html
import json

import pandas as pd

__all__ = ["html_page", "markdown"]

# The pairs table's filters: the columns a reader picks values of.
FILTERED = ("agent", "verdict", "basis")
# The filters, search, sorting and count of the pairs table; the data it reads are the
# table's own cells (``data-value`` where a number sorts by value).
SCRIPT = """
for (const box of document.querySelectorAll('.pairs')) {
  const table = box.querySelector('table'), body = table.tBodies[0];
  const rows = Array.from(body.rows), search = box.querySelector('input');
  const picks = Array.from(box.querySelectorAll('select')), count = box.querySelector('.count');
  const value = (row, i) => {
    const cell = row.cells[i];
    return cell.dataset.value !== undefined ? Number(cell.dataset.value) : cell.textContent;
  };
  const show = () => {
    const words = search.value.toLowerCase();
    let shown = 0;
    for (const row of rows) {
      const keep = picks.every(p => !p.value || row.cells[p.dataset.column].textContent === p.value)
        && (!words || row.textContent.toLowerCase().includes(words));
      row.hidden = !keep;
      shown += keep;
    }
    count.textContent = `${shown} of ${rows.length} pairs shown`;
  };
  table.tHead.querySelectorAll('th').forEach((head, i) => {
    head.tabIndex = 0;
    const sort = () => {
      const up = head.getAttribute('aria-sort') !== 'ascending';
      table.tHead.querySelectorAll('th').forEach(h => h.removeAttribute('aria-sort'));
      head.setAttribute('aria-sort', up ? 'ascending' : 'descending');
      const sorted = rows.slice().sort((a, b) => {
        const x = value(a, i), y = value(b, i);
        const order = typeof x === 'number' && typeof y === 'number'
          ? (isNaN(x) - isNaN(y)) || x - y : String(x).localeCompare(String(y));
        return up ? order : -order;
      });
      body.append(...sorted);
    };
    head.addEventListener('click', sort);
    head.addEventListener('keydown', e => { if (e.key === 'Enter') sort(); });
  });
  search.addEventListener('input', show);
  picks.forEach(p => p.addEventListener('change', show));
  show();
}
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
    ``summary`` embedded as JSON (``summary_json``)."""
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
        elif kind == "figure" and payload[0] in figures:
            name, caption = payload
            data = base64.b64encode(figures[name]).decode("ascii")
            body.append(
                f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
                f"<figcaption>{html.escape(caption)}</figcaption></figure>"
            )
    data = summary_json(summary).replace("</", "<\\/")
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
    """The pairs table with its search box, filters and count (``SCRIPT``); ``payload``
    is the table shown and the values its numeric columns sort by."""
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
                f'<select data-column="{columns.index(name)}" aria-label="{name}">'
                f'<option value="">every {name}</option>{options}</select>'
            )
    controls = (
        '<div class="controls"><input type="search" placeholder="search the pairs" '
        f'aria-label="search the pairs">{"".join(picks)}'
        f'<span class="count">{len(frame)} pairs</span></div>'
    )
    # why (the sentence, behind a click) beside the verdict and its basis
    at = max((columns.index(c) + 1 for c in FILTERED if c in columns), default=len(columns))
    order = [*columns[:at], "why", *columns[at:]]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in order)
    cells = {
        c: [
            f'<td data-value="{_sort_value(v)}">{html.escape(str(t))}</td>'
            for v, t in zip(numbers[c], frame[c], strict=True)
        ]
        if c in numbers
        else [f"<td>{html.escape(str(t))}</td>" for t in frame[c]]
        for c in columns
    }
    cells["why"] = [
        f"<td><details><summary>why</summary><p>{html.escape(s)}</p></details></td>"
        for s in frame["sentence"]
    ]
    rows = [f"<tr>{''.join(cells[c][n] for c in order)}</tr>" for n in range(len(frame))]
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    return f'<div class="pairs">{controls}<div class="scroll">{table}</div></div>'


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
