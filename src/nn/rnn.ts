/**
 * Recurrent layers, as `torch.nn.RNN`, `torch.nn.LSTM` and `torch.nn.GRU`:
 * several layers, both directions, batch-first or time-first input or a
 * `PackedSequence` of sequences of different lengths, and
 * PyTorch's parameter names (`weight_ih_l0`, `bias_hh_l1_reverse`, ...), so a
 * PyTorch state dict loads unchanged. Built from tensor ops (forward and
 * backward on every backend); the input projection of a whole sequence is
 * one matrix product per layer and direction, the recurrence one per step.
 * @module
 */

import { getDefaultDtype } from "../dtype.ts";
import { resolveFactory, tensor, zeros } from "../ops/factory.ts";
import { empty } from "../ops/util.ts";
import { cat, stack } from "../ops/view.ts";
import { formatShape, sameShape } from "../shape.ts";
import { forwardScope } from "../storage.ts";
import type { Tensor } from "../tensor.ts";
import * as F from "./functional.ts";
import { uniform_ } from "./init.ts";
import type { FactoryOptions } from "./layers.ts";
import { Module, Parameter } from "./module.ts";
import {
  type CellState,
  cellStep,
  type CellWeights,
  GATES,
  type Mode,
  projectInput,
} from "./rnn_step.ts";
import { checkCount, checkFloatInput, pyBool, pyFloat, sameDevice } from "./util.ts";
import { PackedSequence } from "./utils/rnn.ts";
import { owned } from "../ops_composite/owned.ts";

/** Options shared by {@link RNN}, {@link LSTM} and {@link GRU}. */
export interface RNNBaseOptions extends FactoryOptions {
  /** Stacked recurrent layers (default 1). */
  numLayers?: number;
  /** Learn `bias_ih` and `bias_hh` (default true). */
  bias?: boolean;
  /** Input and output are [batch, seq, feature] rather than [seq, batch, feature] (default false). */
  batchFirst?: boolean;
  /** Dropout probability on the outputs of every layer but the last, when training (default 0). */
  dropout?: number;
  /** Run a second pass from the end of the sequence and concatenate (default false). */
  bidirectional?: boolean;
}

/** Options of {@link LSTM}. */
export interface LSTMOptions extends RNNBaseOptions {
  /**
   * Features of the hidden state after a learned projection, PyTorch's
   * `proj_size` (default 0: no projection). When positive it must be smaller
   * than `hiddenSize`: `h` then has `projSize` features and `c` keeps
   * `hiddenSize`, with one more weight `weight_hr_l{k}` of shape
   * [projSize, hiddenSize] per layer and direction.
   */
  projSize?: number;
}

/** Options of {@link RNN}. */
export interface RNNOptions extends RNNBaseOptions {
  /** `"tanh"` (default) or `"relu"`. */
  nonlinearity?: "tanh" | "relu";
}

/**
 * What `RNN`, `LSTM` and `GRU` return as the output for an input of type
 * `I`: a PackedSequence for a PackedSequence, else a Tensor.
 */
export type RecurrentOutput<I> = I extends PackedSequence ? PackedSequence : Tensor;

/** Names of the fields that hold one layer and direction's parameters. */
interface CellNames {
  weightIh: string;
  weightHh: string;
  biasIh: string | null;
  biasHh: string | null;
  weightHr: string | null;
}

/**
 * What RNN, LSTM and GRU share, as PyTorch's `RNNBase`: the parameters, held
 * in fields named as PyTorch's state-dict keys, and the loop over layers,
 * directions and time steps. Exported, as `torch.nn.RNNBase`, so that
 * `m instanceof nn.RNNBase` picks out every multi-layer recurrent module.
 * Unlike PyTorch's, it is abstract: PyTorch's `RNNBase(mode, ...)` builds a
 * module with parameters but no `forward`; build `RNN`, `LSTM` or `GRU`.
 */
export abstract class RNNBase extends Module {
  /** Which recurrence. */
  readonly mode: Mode;
  /** Features of each input step. */
  readonly inputSize: number;
  /** Features of the hidden state. */
  readonly hiddenSize: number;
  /** Stacked layers. */
  readonly numLayers: number;
  /** Whether the biases exist. */
  readonly bias: boolean;
  /** Whether input and output are [batch, seq, feature]. */
  readonly batchFirst: boolean;
  /** Dropout between layers when training. */
  readonly dropout: number;
  /** Whether a reverse pass runs too. */
  readonly bidirectional: boolean;
  /** Features of the projected hidden state (LSTM only); 0 when there is no projection. */
  readonly projSize: number;
  /** Parameter field names per layer and direction. */
  protected readonly weightNames: CellNames[][];

  /**
   * The parameters of `numLayers` layers of recurrence `mode` (`"RNN_TANH"`,
   * `"RNN_RELU"`, `"LSTM"` or `"GRU"`, PyTorch's mode strings).
   */
  constructor(mode: Mode, inputSize: number, hiddenSize: number, options: LSTMOptions) {
    super();
    const owner = mode.startsWith("RNN") ? "RNN" : mode;
    this.mode = mode;
    this.inputSize = checkCount(`${owner}: inputSize`, inputSize);
    this.hiddenSize = checkCount(`${owner}: hiddenSize`, hiddenSize, false);
    this.numLayers = checkCount(`${owner}: numLayers`, options.numLayers ?? 1, false);
    this.bias = options.bias ?? true;
    this.batchFirst = options.batchFirst ?? false;
    this.bidirectional = options.bidirectional ?? false;
    const dropout = options.dropout ?? 0;
    if (typeof dropout !== "number" || !(dropout >= 0 && dropout <= 1)) {
      throw new RangeError(`${owner}: dropout must be a number between 0 and 1, got ${dropout}`);
    }
    this.dropout = dropout;
    this.projSize = checkProjSize(mode, this.hiddenSize, options.projSize ?? 0);
    const { dtype, device } = resolveFactory(options, getDefaultDtype());
    const gateSize = GATES[mode] * hiddenSize;
    const directions = this.bidirectional ? 2 : 1;
    const outSize = this.outputSize;
    this.weightNames = [];
    for (let layer = 0; layer < this.numLayers; layer++) {
      const perDirection: CellNames[] = [];
      const layerInput = layer === 0 ? inputSize : outSize * directions;
      for (let direction = 0; direction < directions; direction++) {
        const suffix = `_l${layer}${direction === 1 ? "_reverse" : ""}`;
        const names: CellNames = {
          weightIh: `weight_ih${suffix}`,
          weightHh: `weight_hh${suffix}`,
          biasIh: this.bias ? `bias_ih${suffix}` : null,
          biasHh: this.bias ? `bias_hh${suffix}` : null,
          weightHr: this.projSize > 0 ? `weight_hr${suffix}` : null,
        };
        // Created in PyTorch's state-dict order.
        const shapes: [string | null, number[]][] = [
          [names.weightIh, [gateSize, layerInput]],
          [names.weightHh, [gateSize, outSize]],
          [names.biasIh, [gateSize]],
          [names.biasHh, [gateSize]],
          [names.weightHr, [this.projSize, hiddenSize]],
        ];
        for (const [name, shape] of shapes) {
          if (name) this.registerParameter(name, new Parameter(empty(shape, dtype, device)));
        }
        perDirection.push(names);
      }
      this.weightNames.push(perDirection);
    }
    this.resetParameters();
  }

  /** Features of `h` and of each direction's output: `projSize` when set, else `hiddenSize`. */
  get outputSize(): number {
    return this.projSize > 0 ? this.projSize : this.hiddenSize;
  }

  /**
   * Draws every weight and bias from U(-1/√hidden, 1/√hidden), PyTorch's
   * `reset_parameters`.
   */
  resetParameters(): void {
    const bound = 1 / Math.sqrt(this.hiddenSize);
    for (const p of this.parameters()) uniform_(p, { a: -bound, b: bound });
  }

  /** The parameters of `layer` in `direction` (0 forward, 1 reverse). */
  protected cellWeights(layer: number, direction: number): CellWeights {
    const fields = this as unknown as Record<string, Tensor>;
    const names = this.weightNames[layer][direction];
    const field = (name: string | null) => name ? fields[name] : null;
    return {
      weightIh: fields[names.weightIh],
      weightHh: fields[names.weightHh],
      biasIh: field(names.biasIh),
      biasHh: field(names.biasHh),
      weightHr: field(names.weightHr),
    };
  }

  /**
   * Runs the layers over `input` (padded, or a PackedSequence) from the
   * initial states `h0` (and `c0`); gives the last layer's output sequence
   * (packed as the input was) and every layer's final states.
   */
  protected run(
    input: Tensor | PackedSequence,
    h0: Tensor | null,
    c0: Tensor | null,
  ): { output: Tensor | PackedSequence; h: Tensor; c: Tensor | null } {
    const owner = this.constructor.name;
    const packed = input instanceof PackedSequence ? input : null;
    const x = packed ? packed.data : input as Tensor;
    checkFloatInput(owner, x, packed ? "packed data" : "input");
    const unbatched = !packed && x.ndim === 2;
    if (packed ? x.ndim !== 2 : x.ndim !== 2 && x.ndim !== 3) {
      throw new RangeError(
        packed
          ? `${owner}: expected packed data of 2 dims [sum of lengths, feature], got shape ${
            formatShape(x.shape)
          }`
          : `${owner}: expected input of 2 (unbatched [seq, feature]) or 3 dims (${
            this.batchFirst ? "[batch, seq, feature]" : "[seq, batch, feature]"
          }), got shape ${formatShape(x.shape)}`,
      );
    }
    if (x.shape[x.ndim - 1] !== this.inputSize) {
      throw new RangeError(
        `${owner}: ${packed ? "packed data" : "input"} of shape ${formatShape(x.shape)} has ${
          x.shape[x.ndim - 1]
        } features, expected inputSize ${this.inputSize}`,
      );
    }
    const first = this.cellWeights(0, 0).weightIh;
    sameDevice(owner, { input: x, weights: first });
    if (x.dtype !== first.dtype) {
      throw new TypeError(
        `${owner}: input is ${x.dtype} but the weights are ${first.dtype}; convert one with .to()`,
      );
    }
    // Time-major [seq, batch, feature] for padded input, flattened to the
    // packed layout (steps one after another) with every batch size equal.
    const timeMajor = packed
      ? null
      : unbatched
      ? x.unsqueeze(1)
      : this.batchFirst
      ? x.transpose(0, 1)
      : x;
    const [steps, batch] = timeMajor
      ? timeMajor.shape
      : [packed!.batchSizes.length, packed!.batchSizes[0]];
    const batchSizes = packed ? packed.batchSizes : new Array<number>(steps).fill(batch);
    const directions = this.bidirectional ? 2 : 1;
    const outSize = this.outputSize;
    const states = this.numLayers * directions;
    const { dtype, device } = x;
    // The user's states are in the original batch order, the packed rows sorted.
    const permute = (t: Tensor, p: readonly number[] | null | undefined) =>
      p ? t.indexSelect(1, tensor(Int32Array.from(p), { dtype: "int32", device })) : t;
    const initial = (t: Tensor | null, name: string, features: number): Tensor[] => {
      if (t === null) {
        const zero = zeros([batch, features], { dtype, device });
        return Array.from({ length: states }, () => zero);
      }
      checkFloatInput(owner, t, name);
      const expected = unbatched ? [states, features] : [states, batch, features];
      if (!sameShape(t.shape, expected)) {
        const size = features === this.hiddenSize ? "hiddenSize" : "projSize";
        throw new RangeError(
          `${owner}: ${name} of shape ${formatShape(t.shape)} does not match ${
            formatShape(expected)
          } (layers * directions, ${unbatched ? "" : "batch, "}${size})`,
        );
      }
      sameDevice(owner, { input: x, [name]: t });
      return permute(unbatched ? t.unsqueeze(1) : t, packed?.sortedIndices).unbind(0);
    };
    // The output is new memory as in PyTorch (a batch-first transpose's copy included).
    const result = owned(
      () =>
        forwardScope(() => {
          const hs = initial(h0, "h0", outSize);
          const cs = this.mode === "LSTM" ? initial(c0, "c0", this.hiddenSize) : null;
          let data = timeMajor ? timeMajor.reshape([steps * batch, this.inputSize]) : x;
          const finalH: Tensor[] = [];
          const finalC: Tensor[] = [];
          for (let layer = 0; layer < this.numLayers; layer++) {
            const outputs: Tensor[] = [];
            for (let direction = 0; direction < directions; direction++) {
              const index = layer * directions + direction;
              const start = { h: hs[index], c: cs ? cs[index] : null };
              const { sequence, last } = this.runDirection(
                data,
                batchSizes,
                start,
                this.cellWeights(layer, direction),
                direction === 1,
              );
              finalH.push(last.h);
              if (last.c) finalC.push(last.c);
              outputs.push(
                steps === 0 ? zeros([0, outSize], { dtype, device }) : cat(sequence, 0),
              );
            }
            data = directions === 1 ? outputs[0] : cat(outputs, 1);
            if (this.dropout > 0 && this.training && layer < this.numLayers - 1) {
              data = F.dropout(data, this.dropout, true);
            }
          }
          const gather = (ts: Tensor[]) => {
            const all = permute(stack(ts, 0), packed?.unsortedIndices);
            return unbatched ? all.squeeze(1) : all;
          };
          let output = data;
          if (!packed) {
            output = data.reshape([steps, batch, directions * outSize]);
            output = unbatched
              ? output.squeeze(1)
              : this.batchFirst
              ? output.transpose(0, 1)
              : output;
          }
          return { output, h: gather(finalH), c: cs ? gather(finalC) : null };
        }),
      x,
      h0,
      c0,
    );
    if (!packed) return result;
    const { batchSizes: sizes, sortedIndices, unsortedIndices } = packed;
    return {
      ...result,
      output: new PackedSequence(result.output, sizes, sortedIndices, unsortedIndices),
    };
  }

  /**
   * One layer in one direction over packed `data`: at step t the first
   * `batchSizes[t]` sequences run. Forward, a sequence's final state is
   * taken when the batch shrinks past it; in reverse, a sequence joins from
   * its initial state at its own last step.
   */
  private runDirection(
    data: Tensor,
    batchSizes: readonly number[],
    start: CellState,
    cellWeights: CellWeights,
    reverse: boolean,
  ): { sequence: Tensor[]; last: CellState } {
    const steps = batchSizes.length;
    if (steps === 0) return { sequence: [], last: start };
    // The input projection of every step at once: one matrix product.
    const { projected, weights } = projectInput(this.mode, data, cellWeights);
    const inputs = projected.split(batchSizes as number[], 0);
    const sequence = new Array<Tensor>(steps);
    // Each step in a scope of its own: without gradient its temporaries go at once (an LSTM
    // over 200 steps held 30 state-sized arrays per step until the end), with gradient they
    // go to the graph, as they would have.
    const step = (input: Tensor, state: CellState) =>
      forwardScope(() => cellStep(this.mode, input, state, weights));
    const rowsOf = (s: CellState, from: number, n: number): CellState => ({
      h: s.h.narrow(0, from, n),
      c: s.c ? s.c.narrow(0, from, n) : null,
    });
    if (!reverse) {
      let state = start;
      const doneH: Tensor[] = [];
      const doneC: Tensor[] = [];
      for (let t = 0; t < steps; t++) {
        const rows = state.h.shape[0];
        if (batchSizes[t] < rows) {
          const done = rowsOf(state, batchSizes[t], rows - batchSizes[t]);
          doneH.unshift(done.h);
          if (done.c) doneC.unshift(done.c);
          state = rowsOf(state, 0, batchSizes[t]);
        }
        state = step(inputs[t], state);
        sequence[t] = state.h;
      }
      if (doneH.length === 0) return { sequence, last: state };
      return {
        sequence,
        last: {
          h: cat([state.h, ...doneH], 0),
          c: state.c ? cat([state.c, ...doneC], 0) : null,
        },
      };
    }
    let rows = batchSizes[steps - 1];
    let state = rows < start.h.shape[0] ? rowsOf(start, 0, rows) : start;
    for (let t = steps - 1; t >= 0; t--) {
      if (batchSizes[t] > rows) {
        const joining = rowsOf(start, rows, batchSizes[t] - rows);
        state = {
          h: cat([state.h, joining.h], 0),
          c: state.c ? cat([state.c, joining.c!], 0) : null,
        };
        rows = batchSizes[t];
      }
      state = step(inputs[t], state);
      sequence[t] = state.h;
    }
    return { sequence, last: state };
  }

  /** `10, 20, num_layers=2, batch_first=True`, as PyTorch prints it (without the nonlinearity). */
  override extraRepr(): string {
    const parts = [`${this.inputSize}`, `${this.hiddenSize}`];
    if (this.projSize !== 0) parts.push(`proj_size=${this.projSize}`);
    if (this.numLayers !== 1) parts.push(`num_layers=${this.numLayers}`);
    if (!this.bias) parts.push(`bias=${pyBool(false)}`);
    if (this.batchFirst) parts.push(`batch_first=${pyBool(true)}`);
    if (this.dropout !== 0) parts.push(`dropout=${pyFloat(this.dropout)}`);
    if (this.bidirectional) parts.push(`bidirectional=${pyBool(true)}`);
    return parts.join(", ");
  }
}

/** PyTorch's rules for `proj_size`: LSTM only, a whole number in [0, hiddenSize). */
function checkProjSize(mode: Mode, hiddenSize: number, projSize: number): number {
  if (projSize === 0) return 0;
  if (mode !== "LSTM") {
    throw new RangeError(
      `${
        mode.startsWith("RNN") ? "RNN" : mode
      }: projSize is only supported by LSTM, got ${projSize}`,
    );
  }
  if (!Number.isInteger(projSize) || projSize < 0) {
    throw new RangeError(
      `LSTM: projSize must be a non-negative integer (0 disables the projection), got ${projSize}`,
    );
  }
  if (projSize >= hiddenSize) {
    throw new RangeError(
      `LSTM: projSize ${projSize} must be smaller than hiddenSize ${hiddenSize} (weight_hr would be [${projSize}, ${hiddenSize}])`,
    );
  }
  return projSize;
}

/**
 * An Elman RNN, as `torch.nn.RNN`:
 * `h_t = tanh(W_ih x_t + b_ih + W_hh h_(t-1) + b_hh)` (or relu).
 * `forward(input, h0?)` returns `[output, h_n]`: output [seq, batch,
 * directions * hidden] (batch first with `batchFirst`), h_n
 * [layers * directions, batch, hidden].
 */
export class RNN extends RNNBase {
  /** `"tanh"` or `"relu"`. */
  readonly nonlinearity: "tanh" | "relu";

  /** An RNN from `inputSize` features to `hiddenSize`. */
  constructor(inputSize: number, hiddenSize: number, options: RNNOptions = {}) {
    const nonlinearity = options.nonlinearity ?? "tanh";
    if (nonlinearity !== "tanh" && nonlinearity !== "relu") {
      throw new RangeError(
        `RNN: nonlinearity must be "tanh" or "relu", got ${JSON.stringify(nonlinearity)}`,
      );
    }
    super(nonlinearity === "tanh" ? "RNN_TANH" : "RNN_RELU", inputSize, hiddenSize, options);
    this.nonlinearity = nonlinearity;
  }

  /**
   * `[output, h_n]` for `input` from `h0` (zeros when omitted). For a
   * PackedSequence the output is packed alike and h_n taken at each
   * sequence's own last step, in the original batch order.
   */
  override forward<I extends Tensor | PackedSequence>(
    input: I,
    h0?: Tensor | null,
  ): [RecurrentOutput<I>, Tensor] {
    const { output, h } = this.run(input, h0 ?? null, null);
    return [output as RecurrentOutput<I>, h];
  }
}

/**
 * A long short-term memory network, as `torch.nn.LSTM`, gates in PyTorch's
 * order i, f, g, o: `c_t = f c_(t-1) + i g`, `h_t = o tanh(c_t)`, and with
 * `projSize` `h_t = W_hr (o tanh(c_t))`.
 * `forward(input, [h0, c0]?)` returns `[output, [h_n, c_n]]`; `h` and the
 * output have `projSize` features per direction when it is set.
 */
export class LSTM extends RNNBase {
  /** An LSTM from `inputSize` features to `hiddenSize` (projected to `projSize`). */
  constructor(inputSize: number, hiddenSize: number, options: LSTMOptions = {}) {
    super("LSTM", inputSize, hiddenSize, options);
  }

  /**
   * `[output, [h_n, c_n]]` for `input` from `[h0, c0]` (zeros when
   * omitted). For a PackedSequence the output is packed alike and the final
   * states taken at each sequence's own last step, in the original batch
   * order.
   */
  override forward<I extends Tensor | PackedSequence>(
    input: I,
    state?: [Tensor, Tensor] | null,
  ): [RecurrentOutput<I>, [Tensor, Tensor]] {
    if (state != null && (!Array.isArray(state) || state.length !== 2)) {
      throw new TypeError("LSTM: the initial state must be an array [h0, c0]");
    }
    const { output, h, c } = this.run(input, state?.[0] ?? null, state?.[1] ?? null);
    return [output as RecurrentOutput<I>, [h, c!]];
  }
}

/**
 * A gated recurrent unit, as `torch.nn.GRU`, gates in PyTorch's order r, z,
 * n: `n = tanh(W_in x + b_in + r (W_hn h + b_hn))`,
 * `h_t = (1 - z) n + z h_(t-1)`. `forward(input, h0?)` returns
 * `[output, h_n]`.
 */
export class GRU extends RNNBase {
  /** A GRU from `inputSize` features to `hiddenSize`. */
  constructor(inputSize: number, hiddenSize: number, options: RNNBaseOptions = {}) {
    super("GRU", inputSize, hiddenSize, options);
  }

  /**
   * `[output, h_n]` for `input` from `h0` (zeros when omitted). For a
   * PackedSequence the output is packed alike and h_n taken at each
   * sequence's own last step, in the original batch order.
   */
  override forward<I extends Tensor | PackedSequence>(
    input: I,
    h0?: Tensor | null,
  ): [RecurrentOutput<I>, Tensor] {
    const { output, h } = this.run(input, h0 ?? null, null);
    return [output as RecurrentOutput<I>, h];
  }
}
