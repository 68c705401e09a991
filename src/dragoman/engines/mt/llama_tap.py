"""Alignment-head attention out of llama.cpp, through the scheduler's eval callback.

llama.cpp has no API for attention weights, but every graph node carries a name
and the context's `cb_eval` callback sees each one: first with `ask=True` ("do
you want this tensor?"), then, for the nodes answered yes, with `ask=False` once
the node is computed. Without flash attention the softmaxed scores of layer L are
the node `kq_soft_max-L`, of shape (ggml order) [n_kv, n_tokens, n_head]: a row
per query token of the ubatch, a column per KV-cache cell. The context says which
cells hold the source tokens (`engines.mt.llama_cells`); the tap also reports the
cells the ubatch's last row reached, so the context can check its map of them.

Only the calibrated heads' layers are answered yes: each yes splits the graph
computation there (a sync point), so tapping every layer would cost more. The
questions are answered in C (`llama_native.NodeFilter`): answered in Python, each
of the ~1100 per graph waited for the GIL. The callback, called for the tapped
layers' nodes only, copies the wanted heads' rows of the source columns and
nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from dragoman.engines import llama_native
from dragoman.errors import EngineFailure

_PREFIX = b"kq_soft_max-"


class AttentionTap:
    """Captures the heads' attention of the query rows and key columns it is armed with.

    `node_filter` goes into the context parameters (keep this object alive as long
    as the context). Before a `llama_decode`, `arm(first_row, cols)` says which rows of
    that batch and which cells to keep; `take()` then returns what was captured,
    [heads, rows, cols] in the order of `heads`. Disarmed, no node is answered yes
    and the graph computes in one go.
    """

    def __init__(self, heads: Sequence[tuple[int, int]] = ()) -> None:
        self._by_layer: dict[int, list[int]] = {}
        self._order: list[tuple[int, int]] = []
        self.set_heads(heads)
        self._first_row = 0
        self._cols: npt.NDArray[np.intp] = np.zeros(0, np.intp)
        #: Cells with non-zero attention from the last row of the last armed ubatch
        #: (one head of the first tapped layer): every cell that row may see.
        self.reach: npt.NDArray[np.intp] = np.zeros(0, np.intp)
        self._captured: dict[int, npt.NDArray[np.float32]] = {}
        self._error: str | None = None
        self.node_filter = llama_native.NodeFilter(_PREFIX, self._on_computed)

    def set_heads(self, heads: Sequence[tuple[int, int]]) -> None:
        by_layer: dict[int, list[int]] = {}
        for layer, head in heads:
            by_layer.setdefault(layer, []).append(head)
        self._by_layer = by_layer
        self._order = list(heads)

    @property
    def wanted(self) -> bool:
        """Whether any head is to be captured (`set_heads`)."""
        return bool(self._by_layer)

    def arm(self, first_row: int, cols: npt.NDArray[np.intp]) -> None:
        """Keep rows from `first_row` of the next `llama_decode` and cells `cols` (in that order).

        The caller decodes at most one ubatch per call, so the callback sees each
        tapped layer once per call.
        """
        self.node_filter.select(self._by_layer)
        self._first_row, self._cols = first_row, cols
        self._captured = {}
        self.reach = np.zeros(0, np.intp)
        self._error = None

    def disarm(self) -> None:
        self.node_filter.select(())

    def take(self) -> npt.NDArray[np.float32]:
        """[heads, rows, cols] captured since `arm`, in the order of the heads."""
        self.disarm()
        captured, self._captured = self._captured, {}
        if self._error is not None:
            raise EngineFailure(f"reading llama.cpp's attention failed: {self._error}")
        missing = [layer for layer in self._by_layer if layer not in captured]
        if missing:
            raise EngineFailure(f"llama.cpp computed no attention for layers {missing} (flash attention on?)")
        index = dict.fromkeys(self._by_layer, 0)
        rows = []
        for layer, _head in self._order:
            rows.append(captured[layer][index[layer]])
            index[layer] += 1
        return np.stack(rows)

    def _on_computed(self, tensor: int) -> bool:
        # A tapped layer's node (the filter passes only those, and only while armed), computed;
        # True carries on with the graph. An exception must not unwind into C (ctypes would
        # answer False, which aborts the computation): it is kept for `take`.
        try:
            name = llama_native.tensor_name(tensor)
            layer = int(name[len(_PREFIX) :].split(b"-")[0])
            self._captured[layer] = self._copy(tensor, self._by_layer[layer])
        except Exception as exc:  # see above
            self._error = repr(exc)
        return True

    def _copy(self, tensor: int, heads: list[int]) -> npt.NDArray[np.float32]:
        layout = llama_native.tensor_layout(tensor)
        n_kv, n_tokens = layout.ne[0], layout.ne[1]
        if layout.type != llama_native.GGML_TYPE_F32 or layout.nb[0] != 4 or layout.nb[1] != 4 * n_kv:
            raise EngineFailure("unexpected layout of kq_soft_max")
        start, cols = min(self._first_row, n_tokens), self._cols
        if len(cols) and int(cols.max()) >= n_kv:
            raise EngineFailure(f"source cells up to {int(cols.max())} beyond the {n_kv} cells attended")
        out = np.empty((len(heads), n_tokens - start, len(cols)), np.float32)
        if out.shape[1]:
            # [n_head, n_tokens, n_kv] row-major: one head's rows from `start` are contiguous.
            block = np.empty((n_tokens - start, n_kv), np.float32)
            for i, h in enumerate(heads):
                offset = (h * n_tokens + start) * n_kv * 4
                llama_native.read_tensor(tensor, block, offset)
                out[i] = block[:, cols]
            if not len(self.reach):
                self.reach = np.flatnonzero(block[-1] > 0.0)
        return out
