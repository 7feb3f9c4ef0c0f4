"""Recurrent layers: RNN, LSTM, GRU and their cells, with PyTorch's parameter names,
gate orders (LSTM i,f,g,o; GRU r,z,n), initialisation U(-1/sqrt(H), 1/sqrt(H)),
layouts (batch_first), multiple layers, bidirectionality, dropout between layers
and packed sequences (only the active rows of each step are computed)."""
from __future__ import annotations

import math

from ..tensor import functional as T
from ..tensor.creation import empty, zeros
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter
from .utils.rnn import PackedSequence

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _cell(mode: str, x, state, w_ih, w_hh, b_ih, b_hh):
    """One step of a recurrent cell; state is h, or (h, c) for LSTM."""
    h = state[0] if mode == "LSTM" else state
    gi = F.linear(x, w_ih, b_ih)
    gh = F.linear(h, w_hh, b_hh)
    if mode == "RNN_TANH":
        return T.tanh(gi + gh)
    if mode == "RNN_RELU":
        return T.relu(gi + gh)
    if mode == "LSTM":
        i, f, g, o = T.chunk(gi + gh, 4, -1)
        c = T.sigmoid(f) * state[1] + T.sigmoid(i) * T.tanh(g)
        return T.sigmoid(o) * T.tanh(c), c
    ir, iz, in_ = T.chunk(gi, 3, -1)
    hr, hz, hn = T.chunk(gh, 3, -1)
    r, z = T.sigmoid(ir + hr), T.sigmoid(iz + hz)
    n = T.tanh(in_ + r * hn)
    return (1 - z) * n + z * h


class _CellBase(Module):
    def __init__(self, mode: str, input_size: int, hidden_size: int, bias: bool, dtype=None):
        super().__init__()
        self.mode, self.input_size, self.hidden_size, self.bias = mode, input_size, \
            hidden_size, bias
        g = _GATES[mode] * hidden_size
        self.weight_ih = Parameter(empty(g, input_size, dtype=dtype))
        self.weight_hh = Parameter(empty(g, hidden_size, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(empty(g, dtype=dtype))
            self.bias_hh = Parameter(empty(g, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def _zeros(self, input):
        shape = (input.shape[0], self.hidden_size) if input.ndim == 2 else (self.hidden_size,)
        return zeros(*shape, dtype=input.dtype, device=input.device)

    def _step(self, input, state):
        return _cell(self.mode, input, state, self.weight_ih, self.weight_hh, self.bias_ih,
                     self.bias_hh)

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}"


class RNNCell(_CellBase):
    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'")
        super().__init__("RNN_" + nonlinearity.upper(), input_size, hidden_size, bias, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        return self._step(input, self._zeros(input) if hx is None else hx)


class LSTMCell(_CellBase):
    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, bias, dtype)

    def forward(self, input, hx=None):
        if hx is None:
            hx = (self._zeros(input), self._zeros(input))
        return self._step(input, hx)


class GRUCell(_CellBase):
    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, dtype=None):
        super().__init__("GRU", input_size, hidden_size, bias, dtype)

    def forward(self, input, hx=None):
        return self._step(input, self._zeros(input) if hx is None else hx)


class _RNNBase(Module):
    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, dtype=None):
        super().__init__()
        if not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1]")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional = float(dropout), bidirectional
        dirs = 2 if bidirectional else 1
        g = _GATES[mode] * hidden_size
        self._flat_names = []
        for layer in range(num_layers):
            layer_in = input_size if layer == 0 else hidden_size * dirs
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                names = [f"weight_ih{sfx}", f"weight_hh{sfx}"]
                setattr(self, names[0], Parameter(empty(g, layer_in, dtype=dtype)))
                setattr(self, names[1], Parameter(empty(g, hidden_size, dtype=dtype)))
                if bias:
                    names += [f"bias_ih{sfx}", f"bias_hh{sfx}"]
                    setattr(self, names[2], Parameter(empty(g, dtype=dtype)))
                    setattr(self, names[3], Parameter(empty(g, dtype=dtype)))
                self._flat_names.append(names)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def _weights(self, layer: int, direction: int):
        names = self._flat_names[layer * (2 if self.bidirectional else 1) + direction]
        ws = [getattr(self, n) for n in names]
        return ws if self.bias else ws + [None, None]

    # forward is written in tj.script's subset: scripted, one program serves every
    # sequence length (and, packed, every set of lengths)
    def forward(self, input, hx=None):
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        lstm = self.mode == "LSTM"
        unbatched = input.ndim == 2
        if unbatched:
            input = T.unsqueeze(input, 0 if self.batch_first else 1)
            if hx is not None:
                hx = (T.unsqueeze(hx[0], 1), T.unsqueeze(hx[1], 1)) if lstm else \
                    T.unsqueeze(hx, 1)
        x = T.transpose(input, 0, 1) if self.batch_first else input
        if x.shape[0] == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        hx = self._initial_state(hx, x.shape[1], x)
        final_h, final_c = [], []
        layer_in = x
        for layer in range(self.num_layers):
            outs = self._directions(self._run_direction, layer_in, None, hx, layer,
                                    final_h, final_c)
            layer_in = T.cat(outs, -1) if len(outs) == 2 else outs[0]
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_in = F.dropout(layer_in, self.dropout, True)
        state = self._final_state(final_h, final_c)
        out = T.transpose(layer_in, 0, 1) if self.batch_first else layer_in
        if unbatched:
            out = T.squeeze(out, 0 if self.batch_first else 1)
            state = (T.squeeze(state[0], 1), T.squeeze(state[1], 1)) if lstm else \
                T.squeeze(state, 1)
        return out, state

    def _directions(self, run, layer_in, batch_sizes, hx, layer: int, final_h, final_c):
        """Each direction of one layer run by `run`: their outputs, in direction order;
        the final states are appended to final_h (and final_c)."""
        lstm = self.mode == "LSTM"
        dirs = 2 if self.bidirectional else 1
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            state = (hx[0][k], hx[1][k]) if lstm else hx[k]
            seq, last = run(layer_in, batch_sizes, state, layer, d)
            outs.append(seq)
            if lstm:
                final_h.append(last[0])
                final_c.append(last[1])
            else:
                final_h.append(last)
        return outs

    def _final_state(self, final_h, final_c):
        h_n = T.stack(final_h, 0)
        return (h_n, T.stack(final_c, 0)) if self.mode == "LSTM" else h_n

    def _initial_state(self, hx, batch, like):
        """hx, or zeros of like's dtype on like's device."""
        if hx is None:
            dirs = 2 if self.bidirectional else 1
            h0 = zeros(self.num_layers * dirs, batch, self.hidden_size, dtype=like.dtype,
                       device=like.device)
            return (h0, h0) if self.mode == "LSTM" else h0
        return hx

    def _run_direction(self, x, batch_sizes, state, layer: int, direction: int):
        """One layer in one direction over x [T, B, F]: (outputs [T, B, H], last state).
        The input's product with w_ih is one over the whole sequence; the steps are one
        op (ops/recurrent.py), whose gradient for w_hh is one product too."""
        w_ih, w_hh, b_ih, b_hh = self._weights(layer, direction)
        lstm = self.mode == "LSTM"
        if x.device.type == "cuda":  # rnn_scan has no device kernel yet: the cells' do
            return self._run_cells(x, state, (w_ih, w_hh, b_ih, b_hh), direction)
        hidden = self.hidden_size
        xg = F.linear(T.flip(x, (0,)) if direction else x, w_ih, b_ih)
        if b_hh is None:
            b_hh = zeros(w_hh.shape[0], dtype=w_hh.dtype, device=w_hh.device)
        h0 = state[0] if lstm else state
        history = T.rnn_scan(xg, h0, state[1] if lstm else h0, w_hh, b_hh, self.mode)
        seq = history[1:, :, :hidden]
        last = history[-1]
        state = (last[:, :hidden], last[:, hidden:2 * hidden]) if lstm else last[:, :hidden]
        return (T.flip(seq, (0,)) if direction else seq), state

    def _run_cells(self, x, state, w, direction: int):
        """_run_direction as a loop over the cells' steps."""
        lstm = self.mode == "LSTM"
        steps = x.shape[0]
        outputs = []
        for i in range(steps):
            t = steps - 1 - i if direction else i
            state = _cell(self.mode, x[t], state, *w)
            outputs.append(state[0] if lstm else state)
        seq = T.stack(outputs, 0)
        return (T.flip(seq, (0,)) if direction else seq), state

    def _forward_packed(self, input, hx):
        lstm = self.mode == "LSTM"
        data, batch_sizes = input.data, input.batch_sizes
        hx = self._initial_state(hx, int(batch_sizes[0]), data)
        if input.sorted_indices is not None:  # the caller's order -> sorted
            idx = input.sorted_indices
            hx = (T.index_select(hx[0], 1, idx), T.index_select(hx[1], 1, idx)) if lstm \
                else T.index_select(hx, 1, idx)
        steps = []
        start = 0
        for t in range(batch_sizes.shape[0]):
            bs = int(batch_sizes[t])
            steps.append(data[start:start + bs])
            start = start + bs
        final_h, final_c = [], []
        layer_in = steps
        for layer in range(self.num_layers):
            outs = self._directions(self._run_packed, layer_in, batch_sizes, hx, layer,
                                    final_h, final_c)
            layer_in = outs[0]
            if len(outs) == 2:
                merged = []
                for t in range(len(outs[0])):
                    merged.append(T.cat([outs[0][t], outs[1][t]], -1))
                layer_in = merged
            if self.dropout and self.training and layer < self.num_layers - 1:
                dropped = []
                for s in layer_in:
                    dropped.append(F.dropout(s, self.dropout, True))
                layer_in = dropped
        state = self._final_state(final_h, final_c)
        if input.unsorted_indices is not None:
            idx = input.unsorted_indices
            state = (T.index_select(state[0], 1, idx), T.index_select(state[1], 1, idx)) \
                if lstm else T.index_select(state, 1, idx)
        out = PackedSequence(T.cat(layer_in, 0), input.batch_sizes, input.sorted_indices,
                             input.unsorted_indices)
        return out, state

    def _run_packed(self, steps, batch_sizes, state, layer: int, direction: int):
        """One layer in one direction over packed steps: only the first batch_sizes[t]
        rows are active at step t, the others keep their state."""
        w = self._weights(layer, direction)
        lstm = self.mode == "LSTM"
        n = batch_sizes.shape[0]
        outputs = []
        for i in range(n):
            t = n - 1 - i if direction else i
            x = steps[t]
            bs = x.shape[0]  # batch_sizes[t]: the step's rows (one size for x and state)
            if lstm:
                new = _cell(self.mode, x, (state[0][:bs], state[1][:bs]), *w)
                state = (T.cat([new[0], state[0][bs:]], 0), T.cat([new[1], state[1][bs:]], 0))
                outputs.append(new[0])
            else:
                new = _cell(self.mode, x, state[:bs], *w)
                state = T.cat([new, state[bs:]], 0)
                outputs.append(new)
        if direction:  # produced last step first
            ordered = []
            for i in range(n):
                ordered.append(outputs[n - 1 - i])
            outputs = ordered
        return outputs, state

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.batch_first:
            s += ", batch_first=True"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class RNN(_RNNBase):
    """Elman RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (or relu)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'")
        super().__init__("RNN_" + nonlinearity.upper(), input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional, dtype)
        self.nonlinearity = nonlinearity


class LSTM(_RNNBase):
    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, dtype)


class GRU(_RNNBase):
    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, dtype)
