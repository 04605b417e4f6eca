/**
 * Single-step recurrent cells, as `torch.nn.RNNCell`, `torch.nn.LSTMCell`
 * and `torch.nn.GRUCell`: one time step for a batch [N, input] or one
 * unbatched input [input], with PyTorch's parameter names (`weight_ih`,
 * `weight_hh`, `bias_ih`, `bias_hh`) and initialisation. The step is the one
 * the RNN, LSTM and GRU layers run (src/nn/rnn_step.ts).
 * @module
 */

import { getDefaultDtype } from "../dtype.ts";
import { resolveFactory, zeros } from "../ops/factory.ts";
import { empty } from "../ops/util.ts";
import { formatShape, sameShape } from "../shape.ts";
import { forwardScope } from "../storage.ts";
import type { Tensor } from "../tensor.ts";
import { uniform_ } from "./init.ts";
import type { FactoryOptions } from "./layers.ts";
import { Module, Parameter } from "./module.ts";
import { type CellState, cellStep, GATES, type Mode, projectInput } from "./rnn_step.ts";
import { checkCount, checkFloatInput, pyBool, sameDevice } from "./util.ts";

/** Options of {@link LSTMCell} and {@link GRUCell}. */
export interface RNNCellBaseOptions extends FactoryOptions {
  /** Learn `bias_ih` and `bias_hh` (default true). */
  bias?: boolean;
}

/** Options of {@link RNNCell}. */
export interface RNNCellOptions extends RNNCellBaseOptions {
  /** `"tanh"` (default) or `"relu"`. */
  nonlinearity?: "tanh" | "relu";
}

/**
 * What the three cells share, as PyTorch's `RNNCellBase`: the parameters,
 * the checks of a call and the step. Exported, as `torch.nn.RNNCellBase`, so
 * that `m instanceof nn.RNNCellBase` picks out `RNNCell`, `LSTMCell` and
 * `GRUCell`. Unlike PyTorch's, it is abstract (build one of those three).
 */
export abstract class RNNCellBase extends Module {
  /** Features of the input. */
  readonly inputSize: number;
  /** Features of the hidden state. */
  readonly hiddenSize: number;
  /** Whether the biases exist. */
  readonly bias: boolean;
  /** [gates * hiddenSize, inputSize]. */
  weight_ih: Parameter;
  /** [gates * hiddenSize, hiddenSize]. */
  weight_hh: Parameter;
  /** [gates * hiddenSize], or null without bias. */
  bias_ih: Parameter | null;
  /** [gates * hiddenSize], or null without bias. */
  bias_hh: Parameter | null;
  /** Which recurrence. */
  private readonly mode: Mode;

  /** The parameters of one step of recurrence `mode` (PyTorch's mode strings, as `RNNBase`'s). */
  constructor(mode: Mode, inputSize: number, hiddenSize: number, options: RNNCellBaseOptions) {
    super();
    const owner = this.constructor.name;
    this.mode = mode;
    this.inputSize = checkCount(`${owner}: inputSize`, inputSize);
    this.hiddenSize = checkCount(`${owner}: hiddenSize`, hiddenSize);
    this.bias = options.bias ?? true;
    const { dtype, device } = resolveFactory(options, getDefaultDtype());
    const gates = GATES[mode] * hiddenSize;
    const param = (shape: number[]) => new Parameter(empty(shape, dtype, device));
    this.weight_ih = this.registerParameter("weight_ih", param([gates, inputSize]));
    this.weight_hh = this.registerParameter("weight_hh", param([gates, hiddenSize]));
    this.bias_ih = this.registerParameter("bias_ih", this.bias ? param([gates]) : null);
    this.bias_hh = this.registerParameter("bias_hh", this.bias ? param([gates]) : null);
    this.resetParameters();
  }

  /**
   * Draws every weight and bias from U(-1/√hidden, 1/√hidden), PyTorch's
   * `reset_parameters` (a bound of 0 when `hiddenSize` is 0).
   */
  resetParameters(): void {
    const bound = this.hiddenSize > 0 ? 1 / Math.sqrt(this.hiddenSize) : 0;
    for (const p of this.parameters()) uniform_(p, { a: -bound, b: bound });
  }

  /** Checks a call and runs one step from `hx` (and `cx`), zeros where null. */
  protected runStep(input: Tensor, hx: Tensor | null, cx: Tensor | null): CellState {
    const owner = this.constructor.name;
    checkFloatInput(owner, input);
    if (input.ndim !== 1 && input.ndim !== 2) {
      throw new RangeError(
        `${owner}: expected input of 1 (unbatched [inputSize]) or 2 dims ([batch, inputSize]), got shape ${
          formatShape(input.shape)
        }`,
      );
    }
    if (input.shape[input.ndim - 1] !== this.inputSize) {
      throw new RangeError(
        `${owner}: input of shape ${formatShape(input.shape)} has ${
          input.shape[input.ndim - 1]
        } features, expected inputSize ${this.inputSize}`,
      );
    }
    sameDevice(owner, { input, weight_ih: this.weight_ih });
    if (input.dtype !== this.weight_ih.dtype) {
      throw new TypeError(
        `${owner}: input is ${input.dtype} but the weights are ${this.weight_ih.dtype}; convert one with .to()`,
      );
    }
    const batched = input.ndim === 2;
    const expected = batched ? [input.shape[0], this.hiddenSize] : [this.hiddenSize];
    for (const [name, t] of [["hx", hx], ["cx", cx]] as const) {
      if (t === null) continue;
      checkFloatInput(owner, t, name);
      if (!sameShape(t.shape, expected)) {
        throw new RangeError(
          `${owner}: ${name} of shape ${formatShape(t.shape)} does not match ${
            formatShape(expected)
          } (${batched ? "batch, " : "unbatched input: "}hiddenSize) for input of shape ${
            formatShape(input.shape)
          }`,
        );
      }
      sameDevice(owner, { input, [name]: t });
    }
    return forwardScope(() => {
      const x = batched ? input : input.unsqueeze(0);
      const state = (t: Tensor | null) =>
        t === null
          ? zeros([x.shape[0], this.hiddenSize], { dtype: x.dtype, device: x.device })
          : batched
          ? t
          : t.unsqueeze(0);
      const { projected, weights } = projectInput(this.mode, x, {
        weightIh: this.weight_ih,
        weightHh: this.weight_hh,
        biasIh: this.bias_ih,
        biasHh: this.bias_hh,
        weightHr: null,
      });
      const next = cellStep(this.mode, projected, {
        h: state(hx),
        c: this.mode === "LSTM" ? state(cx) : null,
      }, weights);
      if (batched) return next;
      return { h: next.h.squeeze(0), c: next.c ? next.c.squeeze(0) : null };
    });
  }

  /** `10, 20` (and `bias=False`), as PyTorch prints it. */
  override extraRepr(): string {
    return `${this.inputSize}, ${this.hiddenSize}${this.bias ? "" : `, bias=${pyBool(false)}`}`;
  }
}

/**
 * One step of an Elman RNN, as `torch.nn.RNNCell`:
 * `h' = tanh(W_ih x + b_ih + W_hh h + b_hh)` (or relu). `forward(input,
 * hx?)` takes input [batch, inputSize] (or [inputSize]) and hx [batch,
 * hiddenSize] (or [hiddenSize]; zeros when omitted) and returns h'.
 */
export class RNNCell extends RNNCellBase {
  /** `"tanh"` or `"relu"`. */
  readonly nonlinearity: "tanh" | "relu";

  /** A cell from `inputSize` features to `hiddenSize`. */
  constructor(inputSize: number, hiddenSize: number, options: RNNCellOptions = {}) {
    const nonlinearity = options.nonlinearity ?? "tanh";
    if (nonlinearity !== "tanh" && nonlinearity !== "relu") {
      throw new RangeError(
        `RNNCell: nonlinearity must be "tanh" or "relu", got ${JSON.stringify(nonlinearity)}`,
      );
    }
    super(nonlinearity === "tanh" ? "RNN_TANH" : "RNN_RELU", inputSize, hiddenSize, options);
    this.nonlinearity = nonlinearity;
  }

  /** The next hidden state from `input` and `hx` (zeros when omitted). */
  override forward(input: Tensor, hx?: Tensor | null): Tensor {
    return this.runStep(input, hx ?? null, null).h;
  }

  /** `10, 20, bias=False, nonlinearity=relu`, as PyTorch prints it. */
  override extraRepr(): string {
    const base = super.extraRepr();
    return this.nonlinearity === "tanh" ? base : `${base}, nonlinearity=${this.nonlinearity}`;
  }
}

/**
 * One step of an LSTM, as `torch.nn.LSTMCell`, gates in PyTorch's order i,
 * f, g, o: `c' = f c + i g`, `h' = o tanh(c')`. `forward(input, [h, c]?)`
 * takes input [batch, inputSize] (or [inputSize]) and states [batch,
 * hiddenSize] (or [hiddenSize]; zeros when omitted) and returns `[h', c']`.
 */
export class LSTMCell extends RNNCellBase {
  /** A cell from `inputSize` features to `hiddenSize`. */
  constructor(inputSize: number, hiddenSize: number, options: RNNCellBaseOptions = {}) {
    super("LSTM", inputSize, hiddenSize, options);
  }

  /** `[h', c']` from `input` and `[h, c]` (zeros when omitted). */
  override forward(input: Tensor, hx?: [Tensor, Tensor] | null): [Tensor, Tensor] {
    if (hx != null && (!Array.isArray(hx) || hx.length !== 2)) {
      throw new TypeError("LSTMCell: the state must be an array [h, c]");
    }
    const { h, c } = this.runStep(input, hx?.[0] ?? null, hx?.[1] ?? null);
    return [h, c!];
  }
}

/**
 * One step of a GRU, as `torch.nn.GRUCell`, gates in PyTorch's order r, z,
 * n: `n = tanh(W_in x + b_in + r (W_hn h + b_hn))`, `h' = (1 - z) n + z h`.
 * `forward(input, hx?)` takes input [batch, inputSize] (or [inputSize]) and
 * hx [batch, hiddenSize] (or [hiddenSize]; zeros when omitted) and returns
 * h'.
 */
export class GRUCell extends RNNCellBase {
  /** A cell from `inputSize` features to `hiddenSize`. */
  constructor(inputSize: number, hiddenSize: number, options: RNNCellBaseOptions = {}) {
    super("GRU", inputSize, hiddenSize, options);
  }

  /** The next hidden state from `input` and `hx` (zeros when omitted). */
  override forward(input: Tensor, hx?: Tensor | null): Tensor {
    return this.runStep(input, hx ?? null, null).h;
  }
}
