/**
 * One step of the RNN, LSTM and GRU recurrences, shared by the sequence
 * layers (src/nn/rnn.ts) and the single-step cells (src/nn/rnn_cell.ts) so
 * that both compute exactly the same thing (internal: not exported from
 * `nn`).
 * @module
 */

import { linear } from "../ops/linalg.ts";
import type { Tensor } from "../tensor.ts";

/** Which recurrence, as PyTorch's `mode` strings. */
export type Mode = "RNN_TANH" | "RNN_RELU" | "LSTM" | "GRU";

/** Gate blocks stacked in `weight_ih` and `weight_hh` per mode. */
export const GATES: Record<Mode, number> = { RNN_TANH: 1, RNN_RELU: 1, LSTM: 4, GRU: 3 };

/** The weights of one cell (one layer in one direction). */
export interface CellWeights {
  weightIh: Tensor;
  weightHh: Tensor;
  biasIh: Tensor | null;
  biasHh: Tensor | null;
  /** The LSTM's projection of the hidden state (`weight_hr`), or null. */
  weightHr: Tensor | null;
}

/** Hidden state of one cell: `h`, and `c` for an LSTM. */
export interface CellState {
  h: Tensor;
  c: Tensor | null;
}

/**
 * The input projection `W_ih x + b_ih` of `x` ([..., input]), and the
 * weights to step with. RNN and LSTM add `b_hh` where `b_ih` goes: folded
 * into the input projection once, it costs no add (and, for a whole
 * sequence, no bias reduction) per step; the GRU needs `b_hn` inside the
 * reset gate, so it keeps `b_hh` apart.
 */
export function projectInput(
  mode: Mode,
  x: Tensor,
  weights: CellWeights,
): { projected: Tensor; weights: CellWeights } {
  const fold = mode !== "GRU" && weights.biasIh !== null && weights.biasHh !== null;
  if (!fold) return { projected: linear(x, weights.weightIh, weights.biasIh), weights };
  const bias = weights.biasIh!.add(weights.biasHh!);
  return { projected: linear(x, weights.weightIh, bias), weights: { ...weights, biasHh: null } };
}

/**
 * One time step from the input projection `x` ([batch, gates * hidden],
 * from {@link projectInput}, with the weights it returned) and `state`.
 * RNN: `h = act(x + W_hh h + b_hh)`. LSTM, gates in PyTorch's order i, f,
 * g, o: `c = f c + i g`, `h = o tanh(c)` (then `W_hr h` with a projection).
 * GRU, gates r, z, n: `n = tanh(x_n + r (W_hn h + b_hn))`,
 * `h = (1 - z) n + z h`.
 */
export function cellStep(
  mode: Mode,
  x: Tensor,
  state: CellState,
  weights: CellWeights,
): CellState {
  const hidden = linear(state.h, weights.weightHh, weights.biasHh);
  switch (mode) {
    case "RNN_TANH":
      return { h: x.add(hidden).tanh(), c: null };
    case "RNN_RELU":
      return { h: x.add(hidden).relu(), c: null };
    case "LSTM": {
      const [i, f, g, o] = x.add(hidden).chunk(4, 1);
      const c = f.sigmoid().mul(state.c!).add(i.sigmoid().mul(g.tanh()));
      const h = o.sigmoid().mul(c.tanh());
      return { h: weights.weightHr ? linear(h, weights.weightHr) : h, c };
    }
    case "GRU": {
      const [xr, xz, xn] = x.chunk(3, 1);
      const [hr, hz, hn] = hidden.chunk(3, 1);
      const r = xr.add(hr).sigmoid();
      const z = xz.add(hz).sigmoid();
      const n = xn.add(r.mul(hn)).tanh();
      return { h: n.add(z.mul(state.h.sub(n))), c: null };
    }
  }
}
