/**
 * Tensor's delegating methods (`src/ops_composite/tensor_methods.ts`): every
 * declared method is installed, fits its op's signature (checked at compile
 * time below), and calls that op with the tensor first.
 */

import assert from "node:assert/strict";
import * as mg from "../mod.ts";
import type { Tensor, TensorOps } from "../src/tensor.ts";
import { TENSOR_METHOD_OPS, type TensorMethods } from "../src/ops_composite/tensor_methods.ts";

/** The methods whose op cannot be called with the tensor and the method's own arguments. */
type Misfits = {
  [K in keyof TensorMethods]: TensorOps[(typeof TENSOR_METHOD_OPS)[K]] extends (
    self: Tensor,
    ...args: Parameters<TensorMethods[K]>
  ) => ReturnType<TensorMethods[K]> ? never
    : K;
}[keyof TensorMethods];

// Fails to compile, naming the methods, when a declared signature does not fit its op.
const everyMethodFitsItsOp: [Misfits] extends [never] ? true : Misfits = true;

Deno.test("every delegating method is installed on Tensor and declared", () => {
  assert.equal(everyMethodFitsItsOp, true);
  const x = mg.tensor([1, 2]);
  const names = Object.keys(TENSOR_METHOD_OPS);
  assert.ok(names.length > 100);
  for (const name of names) {
    assert.equal(typeof (x as unknown as Record<string, unknown>)[name], "function", name);
  }
});

Deno.test("a delegating method calls its op with the tensor first", async () => {
  const x = mg.tensor([[1, 2], [3, 4]]);
  assert.deepEqual(await x.movedim(0, 1).toArray(), await mg.movedim(x, 0, 1).toArray());
  assert.deepEqual(await x.remainder(3).toArray(), [[1, 2], [0, 1]]);
  const y = mg.tensor([1, -2, 3]);
  assert.equal(y.neg_(), y);
  assert.deepEqual(await y.toArray(), [-1, 2, -3]);
});
