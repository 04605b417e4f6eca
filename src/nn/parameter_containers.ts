/**
 * `ParameterList` and `ParameterDict`: parameters held in a list or by name,
 * as `torch.nn`'s, registered so that `parameters()`, the state dict (keys
 * `0`, `1`, ... or the names), `to()` and optimizers see them.
 * @module
 */

import type { DType } from "../dtype.ts";
import { Tensor } from "../tensor.ts";
import { forgetFieldOrder, orderedKeys, recordFieldOrder } from "./field_order.ts";
import { Module, Parameter } from "./module.ts";

/** `t` as a Parameter: itself, or a Parameter sharing its storage (as PyTorch 1.13 wraps tensors). */
function asParameter(owner: string, t: unknown, what: string): Parameter {
  if (t instanceof Parameter) return t;
  if (t instanceof Tensor) return new Parameter(t);
  throw new TypeError(
    `${owner}: ${what} must be a Tensor or an nn.Parameter, got ${t === null ? "null" : typeof t}`,
  );
}

const TORCH_DTYPE: Record<DType, string> = {
  float32: "torch.float32",
  float64: "torch.float64",
  int32: "torch.int32",
};

// torch.typename of a cpu tensor, as ParameterDict prints it.
const TYPE_NAME: Record<DType, string> = {
  float32: "FloatTensor",
  float64: "DoubleTensor",
  int32: "IntTensor",
};

function sizeText(p: Tensor): string {
  return p.shape.join("x");
}

/** PyTorch's ` (GPU 0)` after a tensor not in host memory. */
function deviceText(p: Tensor): string {
  return p.device.backend === "cpu" ? "" : ` (GPU ${p.device.index})`;
}

/** The field of `index` in `list` (negative counts from the end); an error when out of range. */
function listKey(list: ParameterList, op: string, index: number): string {
  const n = list.length;
  const i = index < 0 ? index + n : index;
  if (!Number.isInteger(i) || i < 0 || i >= n) {
    throw new RangeError(`ParameterList.${op}: index ${index} is out of range for ${n} parameters`);
  }
  return String(i);
}

/**
 * Parameters held in fields `"0"`, `"1"`, ..., as `torch.nn.ParameterList`:
 * listed by `parameters()` and the state dict under those names (`0`,
 * `layer.1`), moved by `to()`. A plain Tensor given to it becomes a
 * Parameter sharing its storage (and requiring grad), as in PyTorch 1.13.
 * It has no `forward`.
 */
export class ParameterList extends Module {
  /** Holds `values` in order. */
  constructor(values: Iterable<Tensor> = []) {
    super();
    this.extend(values);
  }

  /** Number of parameters. */
  get length(): number {
    let n = 0;
    while (Object.hasOwn(this, String(n))) n++;
    return n;
  }

  /** The parameter at `index` (negative counts from the end). */
  at(index: number): Parameter {
    return (this as unknown as Record<string, Parameter>)[listKey(this, "at", index)];
  }

  /** Replaces the parameter at `index` (negative counts from the end) with `value`; returns this. */
  set(index: number, value: Tensor): this {
    const key = listKey(this, "set", index);
    (this as unknown as Record<string, Parameter>)[key] = asParameter(
      "ParameterList.set",
      value,
      "value",
    );
    return this;
  }

  /** Adds `value` at the end; returns this. */
  append(value: Tensor): this {
    const n = this.length;
    (this as unknown as Record<string, Parameter>)[String(n)] = asParameter(
      "ParameterList.append",
      value,
      `value ${n}`,
    );
    return this;
  }

  /** Adds every tensor of `values` at the end, in order; returns this. */
  extend(values: Iterable<Tensor>): this {
    if (values === null || typeof values !== "object" || !(Symbol.iterator in values)) {
      throw new TypeError(
        `ParameterList.extend: expected an iterable of tensors, got ${
          values === null ? "null" : typeof values
        }`,
      );
    }
    for (const v of values) this.append(v);
    return this;
  }

  /** The parameters in order. */
  *[Symbol.iterator](): IterableIterator<Parameter> {
    const n = this.length;
    for (let i = 0; i < n; i++) yield (this as unknown as Record<string, Parameter>)[String(i)];
  }

  /** `  (0): Parameter containing: [torch.float32 of size 3x4]` per parameter, as PyTorch. */
  override extraRepr(): string {
    return [...this].map((p, i) =>
      `  (${i}): Parameter containing: [${TORCH_DTYPE[p.dtype]} of size ${sizeText(p)}${
        deviceText(p)
      }]`
    ).join("\n");
  }
}

/**
 * Parameters held by name, as `torch.nn.ParameterDict`: each is a field, so
 * `parameters()` and the state dict list it under its key (`layer.scale`).
 * Keys keep the order they were added in; as PyTorch, a plain object given
 * to the constructor or to {@link update} is added in sorted key order, and
 * `[key, tensor]` pairs (a Map, another ParameterDict) in their own order.
 * A plain Tensor becomes a Parameter sharing its storage. It has no
 * `forward`; iterating it gives `[key, parameter]` pairs, as a Map (and
 * `ModuleDict`).
 */
export class ParameterDict extends Module {
  /** Holds the tensors of `parameters` (an object, or [key, tensor] pairs). */
  constructor(parameters: Record<string, Tensor> | Iterable<[string, Tensor]> = {}) {
    super();
    this.update(parameters);
  }

  /** The keys, in order. */
  keys(): string[] {
    return orderedKeys(this).filter((key) => this.has(key));
  }

  /** The parameters, in key order. */
  values(): Parameter[] {
    return this.keys().map((key) => this.get(key));
  }

  /** [key, parameter] pairs, in order. */
  entries(): [string, Parameter][] {
    return this.keys().map((key) => [key, this.get(key)]);
  }

  /** Number of parameters. */
  get length(): number {
    return this.keys().length;
  }

  /** Whether a parameter is held under `key`. */
  has(key: string): boolean {
    // A Tensor, not only a Parameter: a DataParallel replica holds its broadcast copies (set()
    // wraps every value, and a parameter field refuses a plain tensor, so nothing else is one).
    return Object.hasOwn(this, key) &&
      (this as unknown as Record<string, unknown>)[key] instanceof Tensor;
  }

  /** The parameter under `key`; an error naming the keys there are when it is missing. */
  get(key: string): Parameter {
    if (!this.has(key)) {
      throw new RangeError(
        `ParameterDict.get: no parameter ${JSON.stringify(key)} (keys: ${this.keys().join(", ")})`,
      );
    }
    return (this as unknown as Record<string, Parameter>)[key];
  }

  /** Holds `value` under `key` (replacing one there); returns this. */
  set(key: string, value: Tensor): this {
    // A key that names a field or method of the dict (training, forward, keys) would break it.
    if (
      typeof key !== "string" || key === "" || key.includes(".") || (key in this && !this.has(key))
    ) {
      throw new RangeError(
        `ParameterDict: key ${
          JSON.stringify(key)
        } is not usable (empty, has a ".", or names a Module field or method)`,
      );
    }
    const param = asParameter("ParameterDict.set", value, `value for ${JSON.stringify(key)}`);
    (this as unknown as Record<string, Parameter>)[key] = param;
    recordFieldOrder(this, key);
    return this;
  }

  /** Removes and returns the parameter under `key` (PyTorch's `pop`). */
  pop(key: string): Parameter {
    const param = this.get(key);
    delete (this as unknown as Record<string, unknown>)[key];
    forgetFieldOrder(this, key);
    return param;
  }

  /** Removes the parameter under `key`; whether there was one. */
  delete(key: string): boolean {
    if (!this.has(key)) return false;
    this.pop(key);
    return true;
  }

  /** Removes every parameter. */
  clear(): void {
    for (const key of this.keys()) this.pop(key);
  }

  /**
   * Adds (or replaces) the parameters of `parameters`: a plain object in
   * sorted key order, [key, tensor] pairs in theirs; returns this.
   */
  update(parameters: Record<string, Tensor> | Iterable<[string, Tensor]>): this {
    if (parameters === null || typeof parameters !== "object" || parameters instanceof Tensor) {
      throw new TypeError(
        `ParameterDict.update: expected an object of tensors or [key, tensor] pairs, got ${
          parameters === null
            ? "null"
            : parameters instanceof Tensor
            ? "a Tensor"
            : typeof parameters
        }`,
      );
    }
    const entries: Iterable<[string, Tensor]> = Symbol.iterator in parameters
      ? parameters as Iterable<[string, Tensor]>
      : Object.entries(parameters).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    let i = 0;
    for (const entry of entries) {
      if (!Array.isArray(entry) || entry.length !== 2) {
        throw new TypeError(`ParameterDict.update: element ${i} is not a [key, tensor] pair`);
      }
      this.set(entry[0], entry[1]);
      i++;
    }
    return this;
  }

  /** [key, parameter] pairs in order. */
  *[Symbol.iterator](): IterableIterator<[string, Parameter]> {
    yield* this.entries();
  }

  /** `  (key): Parameter containing: [torch.FloatTensor of size 2]` per parameter, as PyTorch 1.13. */
  override extraRepr(): string {
    return this.entries().map(([key, p]) => {
      const type = p.device.backend === "cpu" ? "torch." : "torch.cuda.";
      return `  (${key}): Parameter containing: [${type}${TYPE_NAME[p.dtype]} of size ${
        sizeText(p)
      }${deviceText(p)}]`;
    }).join("\n");
  }
}
