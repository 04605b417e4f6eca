/**
 * Which tensors are uninitialized (`nn.UninitializedParameter`, `nn.UninitializedBuffer`): kept
 * apart from the classes so that `module.ts`, which they extend, can ask without an import
 * circle. Internal to `nn`.
 * @module
 */

const uninitialized = new WeakSet<object>();

/** A tensor that is uninitialized until {@link materializeLazy} gives it a shape. */
export interface LazyTensor {
  /** Gives the tensor data of `shape`, after which it is no longer lazy. */
  materialize(shape: readonly number[]): void;
}

/** Marks `t` as uninitialized (its constructor) or initialized (its materialize). */
export function setLazy(t: object, lazy: boolean): void {
  if (lazy) uninitialized.add(t);
  else uninitialized.delete(t);
}

/** Whether `t` is an uninitialized parameter or buffer, as PyTorch's `is_lazy`. */
export function isLazy(t: unknown): t is LazyTensor {
  return typeof t === "object" && t !== null && uninitialized.has(t);
}

/**
 * PyTorch's error for wrapping a module that still holds uninitialized tensors (`tensors`: its
 * parameters and buffers) in `wrapper` (`DataParallel`, `DistributedDataParallel`).
 */
export function refuseLazy(tensors: Iterable<unknown>, wrapper: string): void {
  for (const t of tensors) {
    if (isLazy(t)) {
      throw new Error(
        `Modules with uninitialized parameters can't be used with \`${wrapper}\`. ` +
          "Run a dummy forward pass to correctly initialize the modules",
      );
    }
  }
}
