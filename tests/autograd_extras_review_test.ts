/**
 * Review of `autograd.detectAnomaly` / `gradcheck`: anomaly mode leaves no state behind when
 * async calls overlap or a backward pass throws, and gradcheck's errors name what changed.
 * @module
 */

import assert from "node:assert/strict";
import { autograd, Function, type FunctionCtx, type Tensor, tensor } from "../mod.ts";
import { backendTest, REF } from "./harness.ts";

const tick = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

Deno.test("detectAnomaly: overlapping async calls that end in any order leave the mode off", async () => {
  assert.equal(autograd.isAnomalyEnabled(), false);
  const first = autograd.detectAnomaly(async () => await tick(5));
  const second = autograd.detectAnomaly(async () => {
    await tick(20);
    assert.equal(autograd.isAnomalyEnabled(), true, "still on while the second runs");
    assert.equal(autograd.isAnomalyCheckNanEnabled(), false, "the second's checkNan");
  }, { checkNan: false });
  await first;
  assert.equal(autograd.isAnomalyEnabled(), true, "the first ended, the second still runs");
  await second;
  assert.equal(autograd.isAnomalyEnabled(), false, "both ended: off, as before them");
  // setDetectAnomaly inside a call holds until that call ends, as inside PyTorch's `with`.
  autograd.setDetectAnomaly(true, { checkNan: false });
  autograd.detectAnomaly(() => {
    assert.equal(autograd.isAnomalyCheckNanEnabled(), true);
    autograd.setDetectAnomaly(false);
    assert.equal(autograd.isAnomalyEnabled(), false);
  });
  assert.equal(autograd.isAnomalyEnabled(), true);
  assert.equal(autograd.isAnomalyCheckNanEnabled(), false);
  autograd.setDetectAnomaly(false);
});

class Throws extends Function {
  static override forward(_ctx: FunctionCtx, x: Tensor): Tensor {
    return x.mul(1);
  }
  static override backward(_ctx: FunctionCtx, _g: Tensor): Tensor {
    throw new Error("backward failed on purpose");
  }
}

backendTest(
  "detectAnomaly: after a backward pass that threw, the next pass's NaN is still reported",
  async (d) => {
    const x = tensor([0, 1], { device: d, requiresGrad: true });
    // sqrt's backward gives NaN, then the node behind it throws.
    const broken = Throws.apply(x).sqrt().mul(0).sum();
    assert.throws(
      () => autograd.detectAnomaly(() => broken.backward()),
      /backward failed on purpose|SqrtBackward/,
    );
    const y = tensor([0, 1], { device: d, requiresGrad: true });
    const loss = y.sqrt().mul(0).sum();
    const message = /Function 'SqrtBackward' returned nan values in its 0th output/;
    if (d.backendDevice.readSync !== undefined) {
      assert.throws(() => autograd.detectAnomaly(() => loss.backward()), message);
    } else {
      // Deferred on a GPU: an async detectAnomaly rejects with it.
      await assert.rejects(
        () => autograd.detectAnomaly(() => Promise.resolve().then(() => loss.backward())),
        message,
      );
    }
    assert.equal(autograd.isAnomalyEnabled(), false);
  },
);

Deno.test("gradcheck: an output whose shape changes under perturbation is named with both shapes", async () => {
  let calls = 0;
  const x = tensor([0.5, 1.5], { dtype: "float64", device: REF, requiresGrad: true });
  await assert.rejects(
    () => autograd.gradcheck((a: Tensor) => (calls++ % 2 === 0 ? a.mul(2) : a.sum()), [x]),
    /output 0 is float64 \[\] and then float64 \[2\]/,
  );
});
