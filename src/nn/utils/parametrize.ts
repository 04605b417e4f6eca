/**
 * Parametrizations, as PyTorch 1.13's `torch.nn.utils.parametrize`: a
 * parameter or buffer of a module replaced by the output of one module (or a
 * chain of them) applied to an unconstrained `original` tensor.
 *
 * PyTorch swaps the module's class for a `Parametrized<Class>` subclass with
 * a property per parametrized tensor. Here the module gets one prototype of
 * its own, inserted between it and its class, whose `constructor` is named
 * `Parametrized<Class>` (so the repr reads as PyTorch's, `instanceof` still
 * holds) and which carries a getter and a setter per parametrized name. The
 * `original` tensors live in `module.parametrizations[name]`, a
 * {@link ParametrizationList}, so `parameters()` and `stateDict()` find them
 * under PyTorch's keys (`parametrizations.weight.original`).
 * @module
 */

import { noGrad } from "../../autograd.ts";
import { formatShape, sameShape } from "../../shape.ts";
import { adopt, forwardScope, keep, tidy } from "../../storage.ts";
import { Tensor } from "../../tensor.ts";
import { forgetFieldOrder } from "../field_order.ts";
import { ModuleDict, ModuleList } from "../layers.ts";
import { Module, Parameter } from "../module.ts";
import { uninstallComputed } from "./computed_parameter.ts";

/**
 * What a parametrization's `rightInverse` throws when it has none to offer
 * (PyTorch's `NotImplementedError`): at registration the original tensor is
 * then kept as it is; assigning to the parametrized tensor rethrows it.
 */
export class NotImplementedError extends Error {
  /** Creates the error with `message`. */
  constructor(message: string) {
    super(message);
    this.name = "NotImplementedError";
  }
}

/**
 * A module with parametrizations: `parametrizations.get(name)` is the
 * {@link ParametrizationList} of the tensor `name`.
 */
export interface Parametrized {
  /** One {@link ParametrizationList} per parametrized tensor. */
  parametrizations: ModuleDict;
}

/** Options of {@link registerParametrization}. */
export interface RegisterParametrizationOptions {
  /**
   * Allow the parametrization to change the tensor's shape or dtype, and skip
   * the checks that it does not (default false), as PyTorch's `unsafe`.
   */
  unsafe?: boolean;
}

/** Options of {@link removeParametrizations}. */
export interface RemoveParametrizationsOptions {
  /**
   * Leave the tensor with its current parametrized value (default true); false
   * puts back the `original` tensor, as PyTorch's `leave_parametrized`.
   */
  leaveParametrized?: boolean;
}

type Fields = Record<string, unknown>;
type RightInverse = (value: Tensor) => Tensor | Tensor[];

/** Marks a module's own prototype made by {@link registerParametrization}. */
const OWN_PROTO = Symbol("parametrized");
/** On that prototype: field → key in `parametrizations` (a buffer's state-dict name may differ). */
const KEYS = Symbol("parametrizedKeys");

function rightInverseOf(m: Module): RightInverse | undefined {
  const fn = (m as unknown as Fields).rightInverse;
  return typeof fn === "function" ? (fn as RightInverse).bind(m) : undefined;
}

function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (value instanceof Tensor) return "Tensor";
  if (Array.isArray(value)) return "Array";
  return typeof value === "object" ? (value as object).constructor.name : typeof value;
}

/** `m.forward(...args)`, with the module as `this` (hooks included, as PyTorch's `m(x)`). */
function callForward(m: Module, ...args: unknown[]): unknown {
  return (m as unknown as { forward: (...a: unknown[]) => unknown }).forward(...args);
}

/** `tensor`'s memory made module state (what PyTorch's `set_` leaves the original sharing). */
function persist<T extends Tensor>(tensor: T): T {
  tensor.storage.persistent = true;
  return keep(tensor);
}

/**
 * Puts `value` into the module state `target` (field `field` of `owner`), as PyTorch's
 * `target.set_(value)`: the same object holds `value`'s storage when the shape and dtype agree
 * (optimizers made before keep working); otherwise a new Parameter (or buffer) takes the field.
 */
function setInto(owner: Module, field: string, target: Tensor, value: Tensor): Tensor {
  if (value === target || value.storage === target.storage) return target;
  if (sameShape(value.shape, target.shape) && value.dtype === target.dtype) {
    target._setStorage(persist(value.detach()).storage);
    return target;
  }
  const fresh = persist(value.detach());
  if (target instanceof Parameter) {
    return owner.registerParameter(field, new Parameter(fresh, target.requiresGrad));
  }
  return owner.registerBuffer(field, fresh, { field });
}

/**
 * The chain of parametrizations of one tensor, as PyTorch's `ParametrizationList`: a
 * `ModuleList` of the parametrizations (`0`, `1`, ...) that also holds the unconstrained tensor
 * `original` (or `original0`, `original1`, ... when the first parametrization's `rightInverse`
 * gives several), a Parameter when the tensor was one and a buffer otherwise. Its
 * {@link forward} computes the parametrized tensor. Made by {@link registerParametrization}.
 */
export class ParametrizationList extends ModuleList {
  /** The unconstrained tensor (when {@link isTensor}). */
  declare original: Tensor;
  /** Whether the shape and dtype checks are skipped (PyTorch's `unsafe`). */
  unsafe: boolean;
  /** Whether there is one `original` (true) or several `original0`... (false). */
  isTensor: boolean;
  /** How many original tensors there are. */
  ntensors: number;

  /**
   * Runs `original` through the `rightInverse` of `modules` (last first, as PyTorch), keeps
   * the result as the original tensor(s) and checks that the chain gives back a tensor of the
   * original's shape and dtype (unless `unsafe`).
   */
  constructor(modules: Module[], original: Tensor, unsafe = false) {
    if (modules.length === 0) {
      throw new RangeError("ParametrizationList requires one or more modules.");
    }
    super(modules);
    this.unsafe = unsafe;
    const originalShape = original.shape;
    const originalDtype = original.dtype;
    const value: unknown = noGrad(() =>
      tidy(() => {
        let next: Tensor | Tensor[] = original;
        for (const m of [...modules].reverse()) {
          const inverse = rightInverseOf(m);
          if (!inverse) continue;
          try {
            next = inverse(next as Tensor);
          } catch (error) {
            if (!(error instanceof NotImplementedError)) throw error;
          }
        }
        return next;
      })
    );
    if (!(value instanceof Tensor) && !Array.isArray(value)) {
      throw new TypeError(
        "'rightInverse' must return a Tensor or an array of tensors. Got " + kindOf(value),
      );
    }
    this.isTensor = value instanceof Tensor;
    this.ntensors = value instanceof Tensor ? 1 : value.length;
    if (value instanceof Tensor) {
      if (value.dtype !== original.dtype) {
        throw new TypeError(
          "When `rightInverse` outputs one tensor, it may not change the dtype.\n" +
            `original.dtype: ${original.dtype}\nrightInverse(original).dtype: ${value.dtype}`,
        );
      }
      const held = noGrad(() => tidy(() => setInto(this, "original", original, value)));
      if (held === original) {
        if (original instanceof Parameter) this.registerParameter("original", original);
        else this.registerBuffer("original", original, { field: "original" });
      }
    } else {
      value.forEach((t: unknown, i) => {
        if (!(t instanceof Tensor)) {
          throw new TypeError(
            "'rightInverse' must return a Tensor or an array of tensors. " +
              `Got element ${i} of the array with type ${kindOf(t)}.`,
          );
        }
        const field = `original${i}`;
        const held = persist(t.detach());
        if (original instanceof Parameter) {
          this.registerParameter(field, new Parameter(held, original.requiresGrad));
        } else {
          this.registerBuffer(field, held, { field });
        }
      });
    }
    if (!this.unsafe) {
      const z: unknown = noGrad(() => tidy(() => this.forward()));
      if (!(z instanceof Tensor)) {
        throw new TypeError(`A parametrization must return a tensor. Got ${kindOf(z)}.`);
      }
      if (z.dtype !== originalDtype) {
        throw new TypeError(
          "Registering a parametrization may not change the dtype of the tensor, unless `unsafe` flag is enabled.\n" +
            `unparametrized dtype: ${originalDtype}\nparametrized dtype: ${z.dtype}`,
        );
      }
      if (!sameShape(z.shape, originalShape)) {
        throw new RangeError(
          "Registering a parametrization may not change the shape of the tensor, unless `unsafe` flag is enabled.\n" +
            `unparametrized shape: ${formatShape(originalShape)}\nparametrized shape: ${
              formatShape(z.shape)
            }`,
        );
      }
    }
  }

  /** The original tensors, `original` or `original0`, `original1`, .... */
  originals(): Tensor[] {
    const fields = this as unknown as Fields;
    if (this.isTensor) return [this.original];
    return Array.from({ length: this.ntensors }, (_, i) => fields[`original${i}`] as Tensor);
  }

  /**
   * Sets the original tensor(s) from a value of the parametrized tensor, through every
   * parametrization's `rightInverse` (last first), without gradient; what `module.weight = x`
   * does. A parametrization without `rightInverse` makes it throw.
   */
  rightInverse(value: Tensor): void {
    const modules = [...this];
    noGrad(() =>
      tidy(() => {
        let next: Tensor | Tensor[] = value;
        for (const m of modules.reverse()) {
          const inverse = rightInverseOf(m);
          if (!inverse) {
            throw new TypeError(
              `parametrization ${m.constructor.name} does not implement rightInverse.`,
            );
          }
          next = inverse(next as Tensor);
        }
        const result: unknown = next;
        if (this.isTensor) {
          if (!(result instanceof Tensor)) {
            throw new TypeError(`\`rightInverse\` should return a tensor. Got ${kindOf(result)}`);
          }
          if (result.dtype !== this.original.dtype) {
            throw new TypeError(
              `The tensor returned by \`rightInverse\` has dtype ${result.dtype} ` +
                `while \`original\` has dtype ${this.original.dtype}`,
            );
          }
          setInto(this, "original", this.original, result);
          return;
        }
        if (!Array.isArray(result)) {
          throw new TypeError(
            `'rightInverse' must return an array of tensors. Got ${kindOf(result)}.`,
          );
        }
        if (result.length !== this.ntensors) {
          throw new RangeError(
            `'rightInverse' must return an array of tensors of length ${this.ntensors}. ` +
              `Got an array of length ${result.length}.`,
          );
        }
        const originals = this.originals();
        result.forEach((t: unknown, i) => {
          if (!(t instanceof Tensor)) {
            throw new TypeError(
              `\`rightInverse\` must return an array of tensors. Got element ${i} of type ${
                kindOf(t)
              }`,
            );
          }
          if (t.dtype !== originals[i].dtype) {
            throw new TypeError(
              `Tensor ${i} returned by \`rightInverse\` has dtype ${t.dtype} ` +
                `while \`original${i}\` has dtype ${originals[i].dtype}`,
            );
          }
          setInto(this, `original${i}`, originals[i], t);
        });
      })
    );
  }

  /** The parametrized tensor: the first parametrization on the original(s), then the others in turn. */
  override forward(): Tensor {
    const modules = [...this];
    return forwardScope(() => {
      let x: unknown = callForward(modules[0], ...this.originals());
      for (const m of modules.slice(1)) x = callForward(m, x);
      if (!(x instanceof Tensor)) {
        throw new TypeError(`A parametrization must return a tensor. Got ${kindOf(x)}.`);
      }
      return x;
    });
  }
}

// ---- caching (PyTorch's `cached()` context manager) ----

let cacheDepth = 0;
let cache = new Map<Module, Map<string, Tensor>>();

/**
 * Runs `fn` with parametrized tensors cached, as PyTorch's `with parametrize.cached():`: each
 * parametrized tensor is computed at its first read inside `fn` and the same tensor is handed
 * out at every later read (a weight read by every step of an RNN is computed once). Nested
 * calls share the outer one's cache, which is emptied when the outermost returns or throws.
 * Returns what `fn` returns.
 */
export function cached<T>(fn: () => T): T {
  if (typeof fn !== "function") {
    throw new TypeError(`parametrize.cached: expected a function, got ${typeof fn}`);
  }
  cacheDepth++;
  try {
    return fn();
  } finally {
    cacheDepth--;
    if (cacheDepth === 0) {
      const done = cache;
      cache = new Map();
      // Kept out of the scopes they were made in while cached; now they belong to the caller's.
      for (const byName of done.values()) for (const t of byName.values()) adopt(t);
    }
  }
}

// ---- the module's prototype ----

function listOf(module: Module, name: string): ParametrizationList {
  const dict = (module as unknown as Fields).parametrizations;
  const list = dict instanceof ModuleDict && dict.has(name) ? dict.get(name) : undefined;
  if (!(list instanceof ParametrizationList)) {
    throw new Error(`${module.constructor.name} has no parametrization on "${name}"`);
  }
  return list;
}

function parametrizedValue(module: Module, name: string): Tensor {
  const list = listOf(module, name);
  if (cacheDepth === 0) return list.forward();
  let byName = cache.get(module);
  if (!byName) cache.set(module, byName = new Map());
  let t = byName.get(name);
  if (!t) byName.set(name, t = keep(list.forward()));
  return t;
}

/**
 * `module`'s own prototype made by {@link registerParametrization}, if any: the nearest, or
 * further up when an older-style weightNorm or spectralNorm inserted its own after it.
 */
function ownProto(module: Module): object | undefined {
  for (let p = Object.getPrototypeOf(module) as object | null; p; p = Object.getPrototypeOf(p)) {
    if (Object.hasOwn(p, OWN_PROTO)) return p;
    if (p === Module.prototype) return undefined;
  }
  return undefined;
}

function injectProto(module: Module): object {
  const base = Object.getPrototypeOf(module) as object;
  const proto = Object.create(base) as object;
  const ctor = function () {} as unknown as { prototype: object };
  Object.defineProperty(ctor, "name", { value: `Parametrized${module.constructor.name}` });
  ctor.prototype = proto;
  Object.defineProperty(proto, "constructor", { value: ctor, configurable: true });
  Object.defineProperty(proto, OWN_PROTO, { value: true });
  Object.defineProperty(proto, KEYS, { value: new Map<string, string>() });
  Object.setPrototypeOf(module, proto);
  return proto;
}

/**
 * A copy of `module`'s prototype `proto` (and of the nearer ones) for this module alone, put in
 * its chain: copies made by `_replicateWith` (replicas, a TransformerEncoder's layers) share the
 * prototype, and must keep their getters when this module's change.
 */
function privateProto(module: Module, proto: object): object {
  const nearer: object[] = [];
  for (let p = Object.getPrototypeOf(module) as object; p !== proto; p = Object.getPrototypeOf(p)) {
    nearer.push(p);
  }
  const descriptors = Object.getOwnPropertyDescriptors(proto) as Record<
    string | symbol,
    PropertyDescriptor
  >;
  descriptors[KEYS] = { value: new Map(keysOf(proto)) };
  const own = Object.create(Object.getPrototypeOf(proto), descriptors) as object;
  let base = own;
  for (const p of nearer.reverse()) {
    base = Object.create(base, Object.getOwnPropertyDescriptors(p)) as object;
  }
  Object.setPrototypeOf(module, base);
  return own;
}

function keysOf(proto: object): Map<string, string> {
  return (proto as Record<symbol, Map<string, string>>)[KEYS];
}

/** The key in `module.parametrizations` of `name` (the key itself, or the field of a buffer). */
function keyOf(module: Module, name: string): string {
  const proto = ownProto(module);
  return (proto && keysOf(proto).get(name)) ?? name;
}

/**
 * @internal The field of `module` holding the parametrized tensor whose state-dict name is
 * `name` (a buffer's field may differ: `runningVar` for `running_var`), if it has one; for
 * `stateless.functionalCall`, which swaps what that field reads.
 */
export function _parametrizedField(module: Module, name: string): string | undefined {
  const proto = ownProto(module);
  if (!proto) return undefined;
  for (const [field, key] of keysOf(proto)) if (key === name) return field;
  return undefined;
}

function injectProperty(proto: object, field: string, name: string): void {
  keysOf(proto).set(field, name);
  Object.defineProperty(proto, field, {
    configurable: true,
    enumerable: false,
    get(this: Module): Tensor {
      return parametrizedValue(this, name);
    },
    set(this: Module, value: Tensor): void {
      if (!(value instanceof Tensor)) {
        throw new TypeError(
          `${this.constructor.name}: cannot assign ${
            kindOf(value)
          } to the parametrized tensor "${name}" (a Tensor expected)`,
        );
      }
      listOf(this, name).rightInverse(value);
    },
  });
}

/** The field of `module`'s own buffer called `name` (state-dict name or field), if any. */
function ownBufferField(module: Module, name: string): string | undefined {
  const buffer = module.namedBuffers("", false).find(([n]) => n === name)?.[1];
  const fields = module as unknown as Fields;
  if (buffer) return Object.keys(module).find((k) => fields[k] === buffer);
  if (!Object.hasOwn(module, name) || !(fields[name] instanceof Tensor)) return undefined;
  return module.buffers(false).includes(fields[name] as Tensor) ? name : undefined;
}

function checkModule(op: string, value: unknown, what: string): asserts value is Module {
  if (!(value instanceof Module)) {
    throw new TypeError(`${op}: ${what} must be an nn.Module, got ${kindOf(value)}`);
  }
}

/**
 * Parametrizes `module`'s parameter or buffer `tensorName` by the module `parametrization`, as
 * PyTorch 1.13's `register_parametrization`: from then on `module[tensorName]` is
 * `parametrization.forward(original)`, computed afresh at every read (see {@link cached}), and
 * gradients flow to `module.parametrizations[tensorName].original`. If `parametrization` has a
 * `rightInverse(value)`, the original is initialised to `rightInverse(current value)` (it may
 * return an array: `original0`, `original1`, ... are then the arguments of `forward`), and
 * assigning `module[tensorName] = x` sets it to `rightInverse(x)`. Registering a second
 * parametrization on the same tensor chains it after the first. Unless `unsafe`, the
 * parametrization must keep the tensor's shape and dtype.
 *
 * The module is then printed as `Parametrized<Class>` with a `(parametrizations): ModuleDict`
 * child, and its state dict holds `parametrizations.<name>.original` and the
 * parametrizations' own parameters and buffers (`parametrizations.<name>.0.<buffer>`), all as
 * PyTorch's. Returns `module`.
 */
export function registerParametrization<M extends Module>(
  module: M,
  tensorName: string,
  parametrization: Module,
  options: RegisterParametrizationOptions = {},
): M & Parametrized {
  const op = "registerParametrization";
  checkModule(op, module, "module");
  checkModule(op, parametrization, "parametrization");
  if (typeof tensorName !== "string" || tensorName === "") {
    throw new TypeError(`${op}: tensorName must be a non-empty string, got ${kindOf(tensorName)}`);
  }
  const unsafe = options.unsafe ?? false;
  parametrization.train(module.training);
  const fields = module as unknown as Fields;
  if (isParametrized(module, tensorName)) {
    if (!unsafe) {
      noGrad(() =>
        tidy(() => {
          const y = listOf(module, keyOf(module, tensorName)).forward();
          const x = callForward(parametrization, y);
          if (!(x instanceof Tensor)) {
            throw new TypeError(`A parametrization must return a tensor. Got ${kindOf(x)}.`);
          }
          if (x.dtype !== y.dtype) {
            throw new TypeError(
              "Registering a parametrization may not change the dtype of the tensor, unless the `unsafe` flag is enabled.\n" +
                `module.${tensorName}.dtype: ${y.dtype}\nparametrization(module.${tensorName}).dtype: ${x.dtype}`,
            );
          }
          if (!sameShape(x.shape, y.shape)) {
            throw new RangeError(
              "Registering a parametrization may not change the shape of the tensor, unless the `unsafe` flag is enabled.\n" +
                `module.${tensorName}.shape: ${formatShape(y.shape)}\n` +
                `parametrization(module.${tensorName}).shape: ${formatShape(x.shape)}`,
            );
          }
          const inverse = rightInverseOf(parametrization);
          if (!inverse) return;
          let z: unknown;
          try {
            z = inverse(x);
          } catch (error) {
            if (error instanceof NotImplementedError) return;
            throw error;
          }
          if (!(z instanceof Tensor)) {
            throw new TypeError(
              `parametrization.rightInverse must return a tensor. Got: ${kindOf(z)}`,
            );
          }
          if (z.dtype !== y.dtype) {
            throw new TypeError(
              "The tensor returned by parametrization.rightInverse must have the same dtype " +
                `as module.${tensorName}, unless the \`unsafe\` flag is enabled.\n` +
                `module.${tensorName}.dtype: ${y.dtype}\nreturned dtype: ${z.dtype}`,
            );
          }
          if (!sameShape(z.shape, y.shape)) {
            throw new RangeError(
              "The tensor returned by parametrization.rightInverse must have the same shape " +
                `as module.${tensorName}, unless the \`unsafe\` flag is enabled.\n` +
                `module.${tensorName}.shape: ${formatShape(y.shape)}\n` +
                `returned shape: ${formatShape(z.shape)}`,
            );
          }
        })
      );
    }
    const list = listOf(module, keyOf(module, tensorName));
    list.append(parametrization);
    list.unsafe ||= unsafe;
    return module as M & Parametrized;
  }
  const value = Object.hasOwn(module, tensorName) ? fields[tensorName] : undefined;
  const isParameter = value instanceof Parameter &&
    module.parameters(false).includes(value);
  const bufferField = isParameter ? undefined : ownBufferField(module, tensorName);
  if (!isParameter && bufferField === undefined) {
    throw new RangeError(
      `Module '${module}' does not have a parameter, a buffer, or a parametrized element with name '${tensorName}'`,
    );
  }
  const field = bufferField ?? tensorName;
  const original = fields[field] as Tensor;
  const key = bufferField === undefined
    ? tensorName
    : module.namedBuffers("", false).find(([, t]) => t === original)?.[0] ?? field;
  const list = new ParametrizationList([parametrization], original, unsafe);
  delete fields[field];
  let proto = ownProto(module);
  if (!proto) {
    proto = injectProto(module);
    module.addModule("parametrizations", new ModuleDict());
  } else {
    proto = privateProto(module, proto);
  }
  injectProperty(proto, field, key);
  (fields.parametrizations as ModuleDict).set(key, list);
  return module as M & Parametrized;
}

/**
 * Whether `module` has a parametrization on `tensorName`, or on any tensor when `tensorName`
 * is left out, as PyTorch's `is_parametrized`.
 */
export function isParametrized(module: Module, tensorName?: string): boolean {
  const dict = (module as unknown as Fields).parametrizations;
  if (!(dict instanceof ModuleDict)) return false;
  return tensorName === undefined ? dict.keys().length > 0 : dict.has(keyOf(module, tensorName));
}

/**
 * The class `module` had before its first parametrization (its own class when it has none), as
 * PyTorch's `type_before_parametrizations`.
 */
export function typeBeforeParametrizations(module: Module): ModuleClass {
  const proto = ownProto(module);
  const base = proto && isParametrized(module)
    ? Object.getPrototypeOf(proto)
    : Object.getPrototypeOf(module);
  return (base as { constructor: ModuleClass }).constructor;
}

/** A module class, as {@link typeBeforeParametrizations} returns it. */
export type ModuleClass = abstract new (...args: never[]) => Module;

/**
 * Removes the parametrizations of `module`'s tensor `tensorName`, as PyTorch's
 * `remove_parametrizations`: it becomes a plain parameter (or buffer) again, registered last,
 * holding its current parametrized value (`leaveParametrized`, the default; the same object as
 * `original`, which keeps optimizers valid) or the unconstrained `original`. Once no tensor is
 * parametrized, `module.parametrizations` goes and the module is of its own class again.
 * Returns `module`.
 */
export function removeParametrizations<M extends Module>(
  module: M,
  tensorName: string,
  options: RemoveParametrizationsOptions = {},
): M {
  checkModule("removeParametrizations", module, "module");
  const leaveParametrized = options.leaveParametrized ?? true;
  if (!isParametrized(module, tensorName)) {
    throw new RangeError(`Module ${module} does not have a parametrization on ${tensorName}`);
  }
  const fields = module as unknown as Fields;
  const key = keyOf(module, tensorName);
  const proto = privateProto(module, ownProto(module)!);
  const field = [...keysOf(proto)].find(([, k]) => k === key)![0];
  const list = listOf(module, key);
  let original: Tensor;
  if (list.isTensor) {
    original = list.original;
    if (leaveParametrized) {
      original = noGrad(() =>
        tidy(() => setInto(list, "original", original, fields[field] as Tensor))
      );
    }
  } else {
    if (!leaveParametrized) {
      throw new RangeError(
        "Cannot leave unparametrized (`leaveParametrized: false`) a tensor " +
          "that is parametrized in terms of a sequence of tensors.",
      );
    }
    const requiresGrad = list.originals().some((t) => t.requiresGrad);
    original = noGrad(() => tidy(() => persist((fields[field] as Tensor).detach())));
    if (requiresGrad) original = new Parameter(original);
  }
  delete (proto as Fields)[field];
  keysOf(proto).delete(field);
  const dict = fields.parametrizations as ModuleDict;
  delete (dict as unknown as Fields)[key];
  forgetFieldOrder(dict, key);
  if (original instanceof Parameter) module.registerParameter(field, original);
  else module.registerBuffer(key, original, { field });
  if (!isParametrized(module)) {
    delete fields.parametrizations;
    // Out of the chain; the prototypes nearer than it (an older-style weightNorm or
    // spectralNorm's) are rebuilt for this module alone.
    uninstallComputed(module, proto);
  }
  return module;
}
