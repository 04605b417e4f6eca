/**
 * Printing tensors as PyTorch 1.13 prints them (`torch/_tensor_str.py`):
 * `await t.format()` is `repr(t)` to the character, `setPrintOptions` /
 * `getPrintOptions` are `torch.set_printoptions` and its state, and
 * `console.log(t)` / `Deno.inspect(t)` show the same text when the values can
 * be had without waiting (host memory, nothing queued: the cpu backend).
 *
 * Where we differ from PyTorch, on purpose:
 * - dtypes print as PyTorch spells the same dtype (`dtype=torch.int32`,
 *   `dtype=torch.float64`), so the text reads as a PyTorch user expects;
 *   the dtype shows unless it is the default dtype (`getDefaultDtype()`), as in
 *   PyTorch (which also hides int64 and bool: multigrad has neither).
 * - the device shows (`device='webgpu:0'`) unless it is `defaultDevice()`;
 *   PyTorch compares only the device type for cpu, so a second logical cpu
 *   device `cpu:1` shows here where PyTorch would show nothing.
 * - `grad_fn=<...>` is PyTorch 1.13's class name for the op, told from what
 *   our node records (tests/grad_fn_names_test.ts checks 123 expressions
 *   against PyTorch: 91 match, 4 have no counterpart here). It matches for
 *   ops recorded under their own name (mul, add, exp, relu, view, cat,
 *   softmax, gather, ...), for those PyTorch records as others (narrow is
 *   `SliceBackward0`, square `PowBackward0`, reshape and flatten
 *   `ReshapeAliasBackward0`, a reduced cross_entropy of class indices
 *   `NllLossBackward0`, batch norm
 *   `NativeBatchNormBackward0`), and for those whose name depends on the
 *   arguments where the node tells them: sum, prod, max and min with or
 *   without dim (a 0-d output), clamp by number or tensor bounds, pow by
 *   which operand needs a gradient, matmul by ranks (`DotBackward0`,
 *   `MvBackward0`, `MmBackward0`, `SqueezeBackward3`, `UnsafeViewBackward0`),
 *   stack, t, transpose, squeeze with a dim, and linear by rank and bias.
 *   It differs where the node cannot tell: ops composed of others show their
 *   last step (mean is `MulBackward0`, std, var, logsumexp, dot, layer norm,
 *   conv2d, embedding, avg pool, silu, elu, softplus, leaky relu, repeat and
 *   the losses other than cross_entropy); bmm is a matmul
 *   (`UnsafeViewBackward0`, PyTorch `BmmBackward0`), as is a 2-d operand
 *   broadcast over a batch (PyTorch `CloneBackward0`); a 0-d result hides
 *   whether dims were given (`x.sum([0, 1])`, `v.max(0)` of a 1-d `v`);
 *   `x.pow(t)` with `t` needing no gradient is `PowBackward0` (PyTorch
 *   `PowBackward1`); a reshape of a transposed tensor is contiguous here
 *   (PyTorch copies: `UnsafeViewBackward0`), and `contiguous()` records
 *   nothing. After backward frees the graph the inputs are gone: stack shows
 *   `CatBackward0`, 1-d·2-d matmul `MvBackward0`, linear its own name.
 * - `edgeitems: 0` summarizes a dimension as `...` alone; PyTorch 1.13 prints
 *   `[ ..., ` and then every element of a 1-d tensor (its `x[-0:]` is all of
 *   x) and fails on higher ranks.
 * @module
 */

import { installTensorOps, Tensor } from "../tensor.ts";
import type { Node } from "../autograd.ts";
import type { TypedArray } from "../dtype.ts";
import { getDefaultDtype } from "../dtype.ts";
import { defaultDevice } from "../device.ts";

/** `torch.set_printoptions`'s options (camelCase); each one left out keeps its value, except `sciMode`. */
export interface PrintOptions {
  /** Digits after the decimal point (default 4). */
  precision?: number;
  /** Elements above which a tensor is summarized with `...` (default 1000; `Infinity`: never). */
  threshold?: number;
  /** Items shown at each end of a summarized dimension (default 3). */
  edgeitems?: number;
  /** Characters per line before wrapping (default 80). */
  linewidth?: number;
  /** Sets the four above first: `"default"`, `"short"` (precision 2, edgeitems 2) or `"full"` (no summary). */
  profile?: "default" | "short" | "full";
  /**
   * `true`/`false` forces scientific notation on/off; left out (or null), it is
   * chosen per tensor. As in PyTorch, every call sets it: a call without it resets it.
   */
  sciMode?: boolean | null;
}

/** The print options in force, as {@link getPrintOptions} returns them. */
export interface ResolvedPrintOptions {
  /** Digits after the decimal point. */
  readonly precision: number;
  /** Elements above which a tensor is summarized. */
  readonly threshold: number;
  /** Items shown at each end of a summarized dimension. */
  readonly edgeitems: number;
  /** Characters per line before wrapping. */
  readonly linewidth: number;
  /** Forced scientific notation, or null where it is chosen per tensor. */
  readonly sciMode: boolean | null;
}

const PROFILES = {
  default: { precision: 4, threshold: 1000, edgeitems: 3, linewidth: 80 },
  short: { precision: 2, threshold: 1000, edgeitems: 2, linewidth: 80 },
  full: { precision: 4, threshold: Infinity, edgeitems: 3, linewidth: 80 },
} as const;

let opts: ResolvedPrintOptions = { ...PROFILES.default, sciMode: null };

function checkCount(name: string, value: number | undefined, min: number): void {
  if (value === undefined) return;
  const ok = name === "threshold"
    ? value === Infinity || Number.isInteger(value)
    : Number.isInteger(value);
  if (typeof value !== "number" || !ok || value < min) {
    throw new RangeError(`setPrintOptions: ${name} must be an integer >= ${min}, got ${value}`);
  }
}

/**
 * Sets how tensors print (`torch.set_printoptions`): a `profile` first, then
 * each option given. Like PyTorch, `sciMode` is set by every call (to null,
 * chosen per tensor, when left out).
 */
export function setPrintOptions(options: PrintOptions = {}): void {
  const { profile, sciMode, ...rest } = options;
  if (profile !== undefined && !(profile in PROFILES)) {
    throw new RangeError(
      `setPrintOptions: profile must be "default", "short" or "full", got ${
        JSON.stringify(profile)
      }`,
    );
  }
  checkCount("precision", rest.precision, 0);
  checkCount("threshold", rest.threshold, 0);
  checkCount("edgeitems", rest.edgeitems, 0);
  checkCount("linewidth", rest.linewidth, 1);
  if (sciMode !== undefined && sciMode !== null && typeof sciMode !== "boolean") {
    throw new TypeError(`setPrintOptions: sciMode must be true, false or null, got ${sciMode}`);
  }
  const next = { ...opts, ...(profile === undefined ? {} : PROFILES[profile]) };
  for (const key of ["precision", "threshold", "edgeitems", "linewidth"] as const) {
    if (rest[key] !== undefined) next[key] = rest[key];
  }
  opts = { ...next, sciMode: sciMode ?? null };
}

/** The print options in force (`torch._tensor_str.PRINT_OPTS`). */
export function getPrintOptions(): ResolvedPrintOptions {
  return { ...opts };
}

// ---- Python's '{:.Nf}' and '{:.Ne}' of a double, exactly (ties to even) ----

const pow10Cache: bigint[] = [];
function pow10(n: number): bigint {
  return pow10Cache[n] ??= 10n ** BigInt(n);
}
const pow5Cache: bigint[] = [];
function pow5(n: number): bigint {
  return pow5Cache[n] ??= 5n ** BigInt(n);
}

const scratch = new DataView(new ArrayBuffer(8));

/** A finite `a > 0` as `n / 10^k` exactly (every double is a finite decimal). */
function exactDecimal(a: number): { n: bigint; k: number } {
  scratch.setFloat64(0, a);
  const hi = scratch.getUint32(0);
  const lo = scratch.getUint32(4);
  const biased = (hi >>> 20) & 0x7ff;
  let mantissa = (BigInt(hi & 0xfffff) << 32n) | BigInt(lo);
  let e2: number;
  if (biased === 0) e2 = -1074;
  else {
    mantissa |= 1n << 52n;
    e2 = biased - 1075;
  }
  if (e2 >= 0) return { n: mantissa << BigInt(e2), k: 0 };
  // m / 2^j = m * 5^j / 10^j
  return { n: mantissa * pow5(-e2), k: -e2 };
}

/** `n / 10^shift` rounded half to even (as Python's correctly rounded formatting). */
function roundShift(n: bigint, shift: number): bigint {
  if (shift <= 0) return n * pow10(-shift);
  const d = pow10(shift);
  const q = n / d;
  const r2 = (n % d) * 2n;
  return r2 > d || (r2 === d && (q & 1n) === 1n) ? q + 1n : q;
}

function special(x: number): string | null {
  if (Number.isNaN(x)) return "nan";
  if (x === Infinity) return "inf";
  if (x === -Infinity) return "-inf";
  return null;
}

const negative = (x: number) => x < 0 || Object.is(x, -0);

/** Python's `'{:.{p}f}'.format(x)`. */
export function formatFixed(x: number, p: number): string {
  const s = special(x);
  if (s !== null) return s;
  const sign = negative(x) ? "-" : "";
  const a = Math.abs(x);
  let digits: string;
  if (a === 0) digits = "0".repeat(p + 1);
  else {
    const { n, k } = exactDecimal(a);
    digits = roundShift(n, k - p).toString().padStart(p + 1, "0");
  }
  const int = digits.slice(0, digits.length - p);
  return p === 0 ? sign + int : `${sign}${int}.${digits.slice(digits.length - p)}`;
}

/** Python's `'{:.{p}e}'.format(x)` (exponent of at least two digits). */
export function formatExponent(x: number, p: number): string {
  const s = special(x);
  if (s !== null) return s;
  const sign = negative(x) ? "-" : "";
  const a = Math.abs(x);
  let digits: string;
  let e10 = 0;
  if (a === 0) digits = "0".repeat(p + 1);
  else {
    const { n, k } = exactDecimal(a);
    const len = n.toString().length;
    e10 = len - k - 1;
    let r = roundShift(n, len - 1 - p);
    if (r === pow10(p + 1)) {
      r /= 10n;
      e10++;
    }
    digits = r.toString();
  }
  const mantissa = p === 0 ? digits : `${digits[0]}.${digits.slice(1)}`;
  const exp = `${e10 < 0 ? "-" : "+"}${String(Math.abs(e10)).padStart(2, "0")}`;
  return `${sign}${mantissa}e${exp}`;
}

// ---- torch._tensor_str._Formatter ----

/** How the elements of one tensor print: widths and notation chosen from all of them. */
class Formatter {
  readonly floating: boolean;
  intMode = true;
  sciMode = false;
  maxWidth = 1;

  constructor(
    floating: boolean,
    values: ArrayLike<number>,
    private readonly o: ResolvedPrintOptions,
  ) {
    this.floating = floating;
    if (!floating) {
      for (let i = 0; i < values.length; i++) {
        this.maxWidth = Math.max(this.maxWidth, String(values[i]).length);
      }
      if (o.sciMode !== null) this.sciMode = o.sciMode;
      return;
    }
    const finite: number[] = [];
    for (let i = 0; i < values.length; i++) {
      const v = values[i];
      if (Number.isFinite(v) && v !== 0) finite.push(v);
    }
    // PyTorch returns here before applying sci_mode: a tensor of only zeros and non-finites ignores it.
    if (finite.length === 0) return;
    let min = Infinity;
    let max = 0;
    for (const v of finite) {
      const a = Math.abs(v);
      if (a < min) min = a;
      if (a > max) max = a;
      if (this.intMode && v !== Math.ceil(v)) this.intMode = false;
    }
    const p = o.precision;
    const width = (f: (v: number) => number) => {
      for (const v of finite) this.maxWidth = Math.max(this.maxWidth, f(v));
    };
    if (this.intMode) {
      if (max / min > 1000 || max > 1e8) {
        this.sciMode = true;
        width((v) => formatExponent(v, p).length);
      } else {
        // One more for the "." that marks a float.
        width((v) => formatFixed(v, 0).length + 1);
      }
    } else if (max / min > 1000 || max > 1e8 || min < 1e-4) {
      this.sciMode = true;
      width((v) => formatExponent(v, p).length);
    } else {
      width((v) => formatFixed(v, p).length);
    }
    if (o.sciMode !== null) this.sciMode = o.sciMode;
  }

  format(value: number): string {
    let ret: string;
    if (this.floating) {
      if (this.sciMode) ret = formatExponent(value, this.o.precision);
      else if (this.intMode) {
        ret = formatFixed(value, 0);
        if (Number.isFinite(value)) ret += ".";
      } else ret = formatFixed(value, this.o.precision);
    } else ret = String(value);
    return ret.padStart(this.maxWidth, " ");
  }
}

// ---- the layout: _tensor_str_with_formatter, get_summarized_data, _add_suffixes ----

/** The flat indices a summary shows (get_summarized_data), in order. */
function summarizedIndices(shape: readonly number[], edge: number): number[] {
  const out: number[] = [];
  const walk = (d: number, base: number) => {
    if (d === shape.length) {
      out.push(base);
      return;
    }
    let stride = 1;
    for (let i = d + 1; i < shape.length; i++) stride *= shape[i];
    const n = shape[d];
    const rows = n > 2 * edge
      ? [...Array(edge).keys(), ...Array.from({ length: edge }, (_, i) => n - edge + i)]
      : [...Array(n).keys()];
    for (const r of rows) walk(d + 1, base + r * stride);
  };
  walk(0, 0);
  return out;
}

function body(
  values: ArrayLike<number>,
  shape: readonly number[],
  indent: number,
  floating: boolean,
  o: ResolvedPrintOptions,
): string {
  const numel = values.length;
  if (numel === 0) return "[]";
  const summarize = numel > o.threshold;
  const shown = summarize ? summarizedIndices(shape, o.edgeitems).map((i) => values[i]) : values;
  const formatter = new Formatter(floating, shown, o);
  const edge = o.edgeitems;

  const strides = shape.map((_, d) => shape.slice(d + 1).reduce((a, b) => a * b, 1));
  const vector = (base: number, indent: number): string => {
    const n = shape[shape.length - 1];
    const elementLength = formatter.maxWidth + 2;
    const perLine = Math.max(1, Math.floor((o.linewidth - indent) / elementLength));
    const data = summarize && n > 2 * edge
      ? [
        ...Array.from({ length: edge }, (_, i) => formatter.format(values[base + i])),
        " ...",
        ...Array.from({ length: edge }, (_, i) => formatter.format(values[base + n - edge + i])),
      ]
      : Array.from({ length: n }, (_, i) => formatter.format(values[base + i]));
    const lines: string[] = [];
    for (let i = 0; i < data.length; i += perLine) {
      lines.push(data.slice(i, i + perLine).join(", "));
    }
    return "[" + lines.join(",\n" + " ".repeat(indent + 1)) + "]";
  };
  const walk = (d: number, base: number, indent: number): string => {
    const dim = shape.length - d;
    if (dim === 0) return formatter.format(values[base]);
    if (dim === 1) return vector(base, indent);
    const n = shape[d];
    const slice = (i: number) => walk(d + 1, base + i * strides[d], indent + 1);
    const slices = summarize && n > 2 * edge
      ? [
        ...Array.from({ length: edge }, (_, i) => slice(i)),
        "...",
        ...Array.from({ length: edge }, (_, i) => slice(n - edge + i)),
      ]
      : Array.from({ length: n }, (_, i) => slice(i));
    return "[" + slices.join("," + "\n".repeat(dim - 1) + " ".repeat(indent + 1)) + "]";
  };
  return walk(0, 0, indent);
}

function addSuffixes(text: string, suffixes: string[], indent: number, linewidth: number): string {
  const parts = [text];
  let lastLineLength = text.length - text.lastIndexOf("\n") + 1;
  for (const suffix of suffixes) {
    if (lastLineLength + suffix.length + 2 > linewidth) {
      parts.push(",\n" + " ".repeat(indent) + suffix);
      lastLineLength = indent + suffix.length;
    } else {
      parts.push(", " + suffix);
      lastLineLength += suffix.length + 2;
    }
  }
  parts.push(")");
  return parts.join("");
}

/**
 * Our nodes whose PyTorch 1.13 name is another op's, whatever the arguments:
 * PyTorch records `narrow` as a slice, `square` as `pow(x, 2)`, `reshape` and
 * `flatten` of a contiguous tensor as `_reshape_alias`, and `cross_entropy`
 * (with class indices, reduced) ends in `nll_loss`. Our `squeeze(dim)` and
 * `t()` record names of their own ("squeezeDim", "t") so that PyTorch's
 * `squeeze(dim)` (overload 1, where `squeeze()` is 0) and `t` show.
 */
const PYTORCH_NODE: Readonly<Record<string, string>> = {
  narrow: "SliceBackward0",
  square: "PowBackward0",
  reshape: "ReshapeAliasBackward0",
  flatten: "ReshapeAliasBackward0",
  squeezeDim: "SqueezeBackward1",
  t: "TBackward0",
  log1p: "Log1PBackward0",
  norm: "NormBackward1",
  crossEntropy: "NllLossBackward0",
  batchNorm: "NativeBatchNormBackward0",
  maxPool2d: "MaxPool2DWithIndicesBackward0",
};

/**
 * PyTorch 1.13's grad_fn of `matmul` by the operands' ranks: 1-d·1-d `dot`,
 * 2-d·1-d `mv`, 1-d·2-d `mm` of an unsqueezed vector squeezed back, 2-d·2-d
 * `mm`, and with a batch the product folded into `bmm` or `mm` and unfolded
 * by `_unsafe_view`. Our matmul records its batched product (a `[batch, m,
 * n]` node of two inputs) under a reshape to the result, also named
 * "matmul". The result's rank tells the ranks, except 2-d·1-d from 1-d·2-d
 * (both 1-d) and 2-d·2-d from 1-d·3-d or 3-d·1-d (all 2-d): the product's
 * shape tells those while the graph is kept (`mv`'s is `[1, m, 1]`, an
 * unbatched `mm`'s `[1, m, n]`).
 * Batched, a 2-d first operand is `CloneBackward0` in PyTorch; we cannot tell
 * it from the others and say `UnsafeViewBackward0`. `bmm` records a matmul
 * too, so its `BmmBackward0` shows as `UnsafeViewBackward0`.
 */
function matmulGradFn(node: Node): string | null {
  if (node.inputs.length > 1) return null; // the batched product itself: not a result
  const shape = node.outputs[0].shape;
  const product = node.inputs[0]?.shape;
  switch (shape.length) {
    case 0:
      return "DotBackward0";
    case 1:
      return product && !(product[1] === shape[0] && product[2] === 1)
        ? "SqueezeBackward3"
        : "MvBackward0";
    case 2:
      return product && !(product[0] === 1 && product[1] === shape[0] && product[2] === shape[1])
        ? "UnsafeViewBackward0"
        : "MmBackward0";
    default:
      return "UnsafeViewBackward0";
  }
}

/** A full reduction (0-d output): PyTorch's overload without `dim`. */
const reducedToScalar = (node: Node) => node.outputs[0].shape.length === 0;

/**
 * Nodes whose PyTorch name depends on the arguments, told from what the node
 * keeps: its output's shape always, its inputs (null where one needs no
 * gradient) and their producers until backward releases them. Null: not told.
 */
const BY_ARGUMENTS: Readonly<Record<string, (node: Node) => string | null>> = {
  // sum() and prod() are overload 0, sum(dim) and prod(dim) overload 1; max() and min() the reverse.
  sum: (node) => reducedToScalar(node) ? "SumBackward0" : "SumBackward1",
  prod: (node) => reducedToScalar(node) ? "ProdBackward0" : "ProdBackward1",
  max: (node) => reducedToScalar(node) ? "MaxBackward1" : "MaxBackward0",
  min: (node) => reducedToScalar(node) ? "MinBackward1" : "MinBackward0",
  // Number bounds record x alone; tensor bounds record them too (null where they need no gradient).
  clamp: (node) => node.inputs.length >= 2 ? "ClampBackward0" : "ClampBackward1",
  // Overload 1 is a tensor exponent, 2 a number base; a tensor operand needing no gradient is
  // recorded as null, as a number is, so `pow(t, x)` and `x.pow(t)` with such a `t` show 2 and 0.
  pow: ({ inputs: [base, exponent] }) =>
    exponent ? (base ? "PowBackward1" : "PowBackward2") : "PowBackward0",
  matmul: matmulGradFn,
  // stack reshapes its inputs under its own name before cat.
  cat: (node) => {
    const producers = node.edges.filter((e) => e !== null);
    return producers.length > 0 && producers.every((e) => e.node.name === "stack")
      ? "StackBackward0"
      : null;
  },
};

/** `type(t.grad_fn).__name__` as PyTorch 1.13 would print it for our `node`. */
function gradFnName(node: Node): string {
  const { name } = node;
  return BY_ARGUMENTS[name]?.(node) ?? PYTORCH_NODE[name] ??
    `${name.charAt(0).toUpperCase()}${name.slice(1)}Backward0`;
}

/**
 * PyTorch 1.13's grad_fn of `F.linear` (nn.Linear's output), which depends on
 * the input's rank and on the bias: `AddmmBackward0` for a 2-d input with a
 * bias. Our linear records its product (inputs x, weight and, fused, bias; an
 * unfused bias adds an `add` node) under a reshape node also named "linear",
 * so the bias shows only while the graph is kept: after backward released it,
 * null (our name, `LinearBackward0`).
 */
function linearGradFn(t: Tensor): string | null {
  const node = t.gradFn;
  if (node?.name !== "linear" || node.inputs.length !== 1) return null;
  const product = node.edges[0]?.node;
  if (product === undefined) return null;
  const bias = product.name === "add" || (product.name === "linear" && product.inputs.length === 3);
  switch (t.ndim) {
    case 1:
      return bias ? "AddBackward0" : "SqueezeBackward3";
    case 2:
      return bias ? "AddmmBackward0" : "MmBackward0";
    case 3:
      return bias ? "ViewBackward0" : "UnsafeViewBackward0";
    default:
      return bias ? "AddBackward0" : "UnsafeViewBackward0";
  }
}

/** PyTorch's `str(dtype)`. */
const torchDtype = (dtype: string) => `torch.${dtype}`;

function isDefaultDevice(t: Tensor): boolean {
  try {
    return String(t.device) === String(defaultDevice());
  } catch {
    // No default device started (cpu refused to start): then none is the default.
    return false;
  }
}

/**
 * `repr(t)` of PyTorch 1.13 for `t` holding `values` (its elements in order,
 * as `await t.data()` gives them), with the print options in force.
 */
export function tensorRepr(t: Tensor, values: ArrayLike<number>): string {
  if (values.length !== t.numel()) {
    throw new RangeError(
      `tensorRepr: ${values.length} values for a tensor of shape [${
        t.shape.join(", ")
      }] (${t.numel()} elements)`,
    );
  }
  const o = opts;
  const prefix = "tensor(";
  const indent = prefix.length;
  const suffixes: string[] = [];
  if (!isDefaultDevice(t)) suffixes.push(`device='${t.device}'`);
  const isDefaultDtype = t.dtype === getDefaultDtype();
  if (t.numel() === 0 && t.ndim !== 1) {
    suffixes.push(`size=(${t.shape.join(", ")})`);
  }
  if (!isDefaultDtype) suffixes.push(`dtype=${torchDtype(t.dtype)}`);
  const text = prefix + body(values, t.shape, indent, t.dtype !== "int32", o);
  const node = t.gradFn;
  if (node !== null) suffixes.push(`grad_fn=<${linearGradFn(t) ?? gradFnName(node)}>`);
  else if (t.requiresGrad) suffixes.push("requires_grad=True");
  return addSuffixes(text, suffixes, indent, o.linewidth);
}

/** The values of `t` now, where its device's memory is host memory and nothing is queued; else null. */
export function valuesNow(t: Tensor): TypedArray | null {
  const { device } = t;
  const backend = device.backendDevice;
  if (backend.readSync === undefined || !device.stream.idle) return null;
  try {
    return backend.readSync(t.storage.buffer("inspect"), 0, t.numel(), t.dtype);
  } catch {
    return null; // released memory: the one-line form says so below
  }
}

/** PyTorch's `repr(t)`, read from its device: `await t.format()` (a Parameter adds its header). */
export async function formatTensor(t: Tensor): Promise<string> {
  return tensorRepr(t, t.numel() === 0 ? [] : await t.data());
}

/**
 * The text `console.log(t)` shows: `repr(t)` when the values can be read
 * without waiting, else one line naming what can be known now and how to
 * get the values.
 */
export function inspectTensor(t: Tensor): string {
  let numel: number;
  try {
    numel = t.numel();
  } catch {
    // A tensor without values yet (nn.UninitializedParameter refuses numel): PyTorch's repr.
    return `<${t.constructor.name}>`;
  }
  const values = numel === 0 ? [] : valuesNow(t);
  if (values !== null) return tensorRepr(t, values);
  // Released memory cannot be read by format() either: say so rather than send the user there.
  const how = t.storage.disposed
    ? "released by dispose(), tidy() or zeroGrad()"
    : "await t.format() reads them";
  return `tensor(<${numel} values on ${t.device}: ${how}>, size=(${t.shape.join(", ")}${
    t.ndim === 1 ? "," : ""
  }), dtype=${torchDtype(t.dtype)}, device='${t.device}')`;
}

// `Tensor.format()` calls this op (declared in `src/ops_composite/tensor_methods.ts`).
installTensorOps({ formatTensor });
Object.defineProperty(Tensor.prototype, Symbol.for("Deno.customInspect"), {
  value(this: Tensor): string {
    return inspectTensor(this);
  },
  writable: true,
  configurable: true,
});
