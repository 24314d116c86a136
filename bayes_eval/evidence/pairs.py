"""``PairRows``: the rows a model reads, per (agent, task) and method.

One table sorted by run and step, and per pair and method the positions of its rows. A
pair's frames are cut when the pair is read, so a model that reads the rows as one table
(``PairRows.first``) builds no frame per pair: 200,000 pairs would cost minutes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np
import pandas as pd

from bayes_eval.messages import note

__all__ = ["PairRows", "note_left_out"]


class PairRows(Mapping):
    """``{(agent, task): {method: rows sorted by run, step}}`` over one sorted table.

    Parameters
    ----------
    table : pandas.DataFrame
        Rows of the normalised evidence table (``Evidence.table``), sorted by run and step.
    positions : dict
        ``{(agent, task): {method: positions in table}}``.
    """

    def __init__(self, table: pd.DataFrame, positions: dict) -> None:
        self.table = table
        self._positions = positions
        self._cut: tuple[pd.DataFrame, dict] | None = None

    @classmethod
    def of(cls, table: pd.DataFrame, pairs: list[tuple[str, str]]) -> PairRows:
        """The rows of ``table`` per pair, for ``pairs`` in their order (a pair without
        rows is left out)."""
        table = table.sort_values(["run", "step"], kind="stable")
        groups = table.groupby(["agent", "task", "method"], sort=False).indices
        # each pair's methods in the order of their first row, as the sorted table has them
        by_pair: dict[tuple[str, str], dict[str, np.ndarray]] = {}
        for (agent, task, method), positions in sorted(groups.items(), key=lambda g: g[1][0]):
            by_pair.setdefault((agent, task), {})[method] = positions
        return cls(table, {pair: by_pair[pair] for pair in pairs if pair in by_pair})

    def __getitem__(self, pair: tuple[str, str]) -> dict[str, pd.DataFrame]:
        ordered, spans = self._ordered()
        return {method: ordered.iloc[start:stop] for method, (start, stop) in spans[pair].items()}

    def _ordered(self) -> tuple[pd.DataFrame, dict]:
        """The rows pair after pair, method after method, and each one's span in them: a
        pair's frames are then slices (a row selection per pair costs a millisecond)."""
        if self._cut is None:
            spans: dict = {}
            at = 0
            for pair, by_method in self._positions.items():
                spans[pair] = {}
                for method, positions in by_method.items():
                    spans[pair][method] = (at, at + positions.size)
                    at += positions.size
            self._cut = self.table.iloc[self.positions()], spans
        return self._cut

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._positions)

    def __len__(self) -> int:
        return len(self._positions)

    def methods(self, pair: tuple[str, str]) -> tuple[str, ...]:
        """The methods ``pair`` has rows of, without cutting its rows."""
        return tuple(self._positions[pair])

    def only(self, pairs: list[tuple[str, str]]) -> PairRows:
        """These rows for ``pairs`` alone (in their order)."""
        return PairRows(self.table, {pair: self._positions[pair] for pair in pairs})

    def first(self, method: str) -> pd.DataFrame:
        """Each pair's first row of ``method`` (by run, then step), in the pairs' order;
        every pair must have one."""
        return self.table.iloc[[by_method[method][0] for by_method in self._positions.values()]]

    def rows(self, method: str) -> tuple[pd.DataFrame, np.ndarray]:
        """Every pair's rows of ``method`` (by run, then step), pair after pair in the
        pairs' order, and each row's pair number; every pair must have some."""
        chunks = [by_method[method] for by_method in self._positions.values()]
        pair = np.repeat(np.arange(len(chunks)), [chunk.size for chunk in chunks])
        positions = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64)
        return self.table.iloc[positions], pair

    def positions(self) -> np.ndarray:
        """The positions in ``table`` of every row kept."""
        kept = [p for by_method in self._positions.values() for p in by_method.values()]
        return np.concatenate(kept) if kept else np.zeros(0, dtype=np.int64)


def note_left_out(evidence, mask, why: str) -> None:
    """One note per method naming the rows of ``mask`` (over ``evidence.table``) left out
    of a fit, and ``why`` (``bayes_eval.messages.note``): nothing disappears silently."""
    if not np.any(mask):
        return
    for method, rows in evidence.table[mask].groupby("method", sort=False):
        numbers = rows["row"].tolist()
        shown = ", ".join(map(str, numbers[:6])) + (", ..." if len(numbers) > 6 else "")
        count = int(rows["n_rows"].sum())
        note(f"left out {count} {method} row(s) (rows {shown}): {why}")
