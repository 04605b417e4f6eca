/**
 * Padding layers, as `torch.nn`'s: `ConstantPad1d/2d/3d`, `ZeroPad2d`,
 * `ReflectionPad1d/2d/3d` and `ReplicationPad1d/2d/3d`, each a fixed call of
 * `functional.pad` with PyTorch's rules for which inputs it takes.
 * @module
 */

import { formatShape } from "../shape.ts";
import { forwardScope } from "../storage.ts";
import type { Tensor } from "../tensor.ts";
import { pad } from "./functional/conv.ts";
import { Module } from "./module.ts";
import { checkTensor, pyFloat } from "./util.ts";

/** One amount for every side, or (before, after) per padded dim, last dim first. */
export type PadSize = number | readonly number[];

type Mode = "constant" | "reflect" | "replicate";

/** The amounts of `padding` for `dims` padded dims: `2 * dims` integers (negative ones crop, as PyTorch's). */
function padAmounts(name: string, padding: PadSize, dims: number): number[] {
  const list = typeof padding === "number"
    ? new Array<number>(2 * dims).fill(padding)
    : Array.isArray(padding)
    ? [...padding]
    : [];
  if (
    list.length !== 2 * dims ||
    list.some((p) => !Number.isInteger(p))
  ) {
    throw new RangeError(
      `${name}: padding must be an integer or ${2 * dims} of them (left, right${
        dims > 1 ? ", top, bottom" : ""
      }${dims > 2 ? ", front, back" : ""}), got ${JSON.stringify(padding)}`,
    );
  }
  return list;
}

/** Shared by every padding layer: the amounts, the mode, and the input checks. */
abstract class PadNd extends Module {
  /** (before, after) amounts per padded dim, last dim first: `(left, right, top, bottom, ...)`. */
  readonly padding: readonly number[];
  /** Padded dims (1, 2 or 3). */
  private readonly dims: number;
  /** How the padding is filled. */
  private readonly mode: Mode;
  /** The constant layers' fill. */
  protected readonly fill: number;

  constructor(dims: number, mode: Mode, padding: PadSize, value = 0) {
    super();
    this.dims = dims;
    this.mode = mode;
    this.padding = padAmounts(this.constructor.name, padding, dims);
    this.fill = value;
  }

  /** Pads `x`: the constant layers take any input with enough dims, the others a (un)batched one. */
  override forward(x: Tensor): Tensor {
    const name = this.constructor.name;
    checkTensor(name, "input", x);
    const n = this.dims;
    if (this.mode === "constant") {
      if (x.ndim < n) {
        throw new RangeError(
          `${name}: padding ${
            pyTuple(this.padding)
          } needs an input of at least ${n} dims, got shape ${formatShape(x.shape)}`,
        );
      }
      return pad(x, this.padding, { value: this.fill });
    }
    if (x.ndim !== n + 1 && x.ndim !== n + 2) {
      throw new RangeError(
        `${name}: expected a ${n + 1}-D (unbatched) or ${n + 2}-D (batched) input, got shape ${
          formatShape(x.shape)
        }`,
      );
    }
    // As PyTorch: only the batch dim may be empty.
    if (x.shape.some((s, i) => s === 0 && !(i === 0 && x.ndim === n + 2))) {
      throw new RangeError(
        `${name}: expected non-empty channel and spatial dims (the batch may be empty), got shape ${
          formatShape(x.shape)
        }`,
      );
    }
    const sizes = x.shape.slice(-n).reverse();
    sizes.forEach((size, i) => {
      const out = size + this.padding[2 * i] + this.padding[2 * i + 1];
      if (out < 1) {
        throw new RangeError(
          `${name}: padding ${pyTuple(this.padding)} leaves ${out} elements of dim ${
            x.ndim - 1 - i
          } (size ${size}) of input of shape ${formatShape(x.shape)}; at least 1 must remain`,
        );
      }
    });
    if (this.padding.every((p) => p >= 0)) return pad(x, this.padding, { mode: this.mode });
    // Negative amounts crop after padding, as PyTorch reflects and
    // replicates about the uncropped edges.
    return forwardScope(() => {
      const grown = pad(x, this.padding.map((p) => Math.max(p, 0)), { mode: this.mode });
      return pad(grown, this.padding.map((p) => Math.min(p, 0)));
    });
  }
}

function pyTuple(list: readonly number[]): string {
  return `(${list.join(", ")})`;
}

/** The constant layers: `padding=(1, 1), value=0.5`. */
abstract class ConstantPadNd extends PadNd {
  /** The fill. */
  get value(): number {
    return this.fill;
  }

  constructor(dims: number, padding: PadSize, value: number) {
    super(dims, "constant", padding, value);
    // Any number, as PyTorch: -inf and NaN fill too.
    if (typeof value !== "number") {
      throw new TypeError(`${this.constructor.name}: value must be a number, got ${typeof value}`);
    }
  }

  /** `padding=(1, 1), value=0.5`. */
  override extraRepr(): string {
    const v = this.value;
    return `padding=${pyTuple(this.padding)}, value=${Number.isInteger(v) ? v : pyFloat(v)}`;
  }
}

/** The reflection and replication layers: `(1, 1, 2, 0)`. */
abstract class EdgePadNd extends PadNd {
  /** `(1, 1, 2, 0)`. */
  override extraRepr(): string {
    return pyTuple(this.padding);
  }
}

/**
 * Pads the last dim of `x` with `value`, as `torch.nn.ConstantPad1d`:
 * `padding` is one amount for both sides or `[left, right]` (negative crops).
 */
export class ConstantPad1d extends ConstantPadNd {
  /** Pads by `padding` with `value`. */
  constructor(padding: PadSize, value: number) {
    super(1, padding, value);
  }
}

/** Pads the last 2 dims with `value`, as `torch.nn.ConstantPad2d`: `[left, right, top, bottom]`. */
export class ConstantPad2d extends ConstantPadNd {
  /** Pads by `padding` with `value`. */
  constructor(padding: PadSize, value: number) {
    super(2, padding, value);
  }
}

/**
 * Pads the last 3 dims with `value`, as `torch.nn.ConstantPad3d`:
 * `[left, right, top, bottom, front, back]`.
 */
export class ConstantPad3d extends ConstantPadNd {
  /** Pads by `padding` with `value`. */
  constructor(padding: PadSize, value: number) {
    super(3, padding, value);
  }
}

/** Pads the last 2 dims with zeros, as `torch.nn.ZeroPad2d`: `[left, right, top, bottom]`. */
export class ZeroPad2d extends ConstantPad2d {
  /** Pads by `padding`. */
  constructor(padding: PadSize) {
    super(padding, 0);
  }

  /** `(1, 1, 2, 0)`. */
  override extraRepr(): string {
    return pyTuple(this.padding);
  }
}

/**
 * Mirrors [N, C, W] (or [C, W]) at the edges without repeating them, as
 * `torch.nn.ReflectionPad1d`; each amount must be less than the width.
 */
export class ReflectionPad1d extends EdgePadNd {
  /** Pads by `padding` (one amount or `[left, right]`). */
  constructor(padding: PadSize) {
    super(1, "reflect", padding);
  }
}

/** Mirrors [N, C, H, W] (or [C, H, W]), as `torch.nn.ReflectionPad2d`: `[left, right, top, bottom]`. */
export class ReflectionPad2d extends EdgePadNd {
  /** Pads by `padding`. */
  constructor(padding: PadSize) {
    super(2, "reflect", padding);
  }
}

/**
 * Mirrors [N, C, D, H, W] (or [C, D, H, W]), as `torch.nn.ReflectionPad3d`:
 * `[left, right, top, bottom, front, back]`.
 */
export class ReflectionPad3d extends EdgePadNd {
  /** Pads by `padding`. */
  constructor(padding: PadSize) {
    super(3, "reflect", padding);
  }
}

/** Repeats the edge of [N, C, W] (or [C, W]), as `torch.nn.ReplicationPad1d`: `[left, right]`. */
export class ReplicationPad1d extends EdgePadNd {
  /** Pads by `padding`. */
  constructor(padding: PadSize) {
    super(1, "replicate", padding);
  }
}

/** Repeats the edges of [N, C, H, W] (or [C, H, W]), as `torch.nn.ReplicationPad2d`. */
export class ReplicationPad2d extends EdgePadNd {
  /** Pads by `padding` (`[left, right, top, bottom]`). */
  constructor(padding: PadSize) {
    super(2, "replicate", padding);
  }
}

/** Repeats the edges of [N, C, D, H, W] (or [C, D, H, W]), as `torch.nn.ReplicationPad3d`. */
export class ReplicationPad3d extends EdgePadNd {
  /** Pads by `padding` (`[left, right, top, bottom, front, back]`). */
  constructor(padding: PadSize) {
    super(3, "replicate", padding);
  }
}
