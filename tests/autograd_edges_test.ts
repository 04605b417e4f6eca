/**
 * Autograd at its edges, as PyTorch 1.13: grad mode cannot span an await (refused, not silently
 * dropped), hooks and queued callbacks run with grad off, a custom Function's backward must give
 * one gradient per input, and `.grad` takes only a gradient of the tensor's dtype.
 * @module
 */

import assert from "node:assert/strict";
import {
  enableGrad,
  Function,
  type FunctionCtx,
  isGradEnabled,
  noGrad,
  queueBackwardCallback,
  registerPostAccumulateGradHook,
  type Tensor,
  tensor,
} from "../mod.ts";

Deno.test("noGrad and enableGrad refuse an async function instead of losing the mode at its await", async () => {
  const w = tensor([1, 2], { requiresGrad: true });
  assert.throws(
    () => noGrad(async () => await Promise.resolve(w.mul(2))),
    /noGrad\(fn\): fn returned a Promise; the grad mode cannot span an await/,
  );
  assert.equal(isGradEnabled(), true, "the mode is restored");
  noGrad(() =>
    assert.throws(
      () => enableGrad(() => Promise.resolve(1)),
      /enableGrad\(fn\): fn returned a Promise/,
    )
  );
  assert.equal(noGrad(() => w.mul(2)).requiresGrad, false);
  await Promise.resolve();
});

Deno.test("hooks and queued callbacks run with grad off (a manual update in a hook works)", async () => {
  const p = tensor([1, 2], { requiresGrad: true });
  const seen: boolean[] = [];
  const remove = registerPostAccumulateGradHook(p, (leaf) => {
    seen.push(isGradEnabled());
    leaf.add_(leaf.grad!.mul(-0.5)); // an optimizer step in the hook, as PyTorch allows
    queueBackwardCallback(() => void seen.push(isGradEnabled()));
  });
  p.mul(tensor([2, 4])).sum().backward();
  remove();
  assert.deepEqual(seen, [false, false]);
  assert.deepEqual(Array.from(await p.data()), [0, 0]);
  assert.equal(isGradEnabled(), true);
});

Deno.test("a Function's backward must give one gradient per input", () => {
  class TooFew extends Function {
    static override forward(_ctx: FunctionCtx, a: Tensor, b: Tensor): Tensor {
      return a.add(b);
    }
    static override backward(_ctx: FunctionCtx, g: Tensor): Tensor {
      return g;
    }
  }
  const a = tensor([1], { requiresGrad: true });
  const b = tensor([2], { requiresGrad: true });
  assert.throws(
    () => (TooFew.apply(a, b) as Tensor).sum().backward(),
    /TooFew.backward returned 1 gradients, expected 2 \(one per input\)/,
  );
});

Deno.test("a null gradient from a Function's backward reaches nothing before it (PyTorch's None)", async () => {
  class FirstOnly extends Function {
    static override forward(_ctx: FunctionCtx, a: Tensor, b: Tensor): Tensor {
      return a.mul(b);
    }
    static override backward(_ctx: FunctionCtx, g: Tensor): (Tensor | null)[] {
      return [g, null];
    }
  }
  const x = tensor([1, 2], { requiresGrad: true });
  const w = tensor([3, 4], { requiresGrad: true });
  // b's producers (mul, then exp) get no gradient: their backward must not run on a null.
  (FirstOnly.apply(x, w.mul(2).exp()) as Tensor).sum().backward();
  assert.deepEqual(await x.grad!.toArray(), [1, 1]);
  assert.equal(w.grad, null);
});

Deno.test("backward names an options object given as the gradient (options go second)", () => {
  const x = tensor([1, 2], { requiresGrad: true });
  assert.throws(
    () => x.sum().backward({ retainGraph: true } as unknown as Tensor),
    /backward: grad must be a Tensor, got an options object \(options go second\)/,
  );
});

Deno.test(".grad takes only a gradient of the tensor's dtype, shape and device", () => {
  const p = tensor([1, 2], { requiresGrad: true });
  assert.throws(
    () => p.grad = tensor([1, 1], { dtype: "int32" }),
    /grad: assigned gradient is int32 of shape \[2\] on cpu:0, expected float32 of shape \[2\] on cpu:0/,
  );
  assert.throws(() => p.grad = tensor([1]), /assigned gradient is float32 of shape \[1\]/);
  p.grad = tensor([3, 4]);
  assert.equal(p.grad.dtype, "float32");
});

Deno.test("writing a value autograd records into a reshape view of a plain buffer is refused", () => {
  const x = tensor([[1, 2], [3, 4]], { requiresGrad: true });
  const buf = tensor([0, 0, 0, 0]);
  const view = buf.reshape([2, 2]);
  // PyTorch would route x's gradient through buf (CopySlices); here it would be lost silently.
  assert.throws(() => view.copy_(x), /copy_: a leaf tensor .*reshape view.*CopySlices/);
  assert.throws(() => buf.add_(x.reshape([4])), /add_: a leaf tensor .*reshape view/);
  // Values that autograd does not record still go through, as before.
  view.fill_(1);
  noGrad(() => view.copy_(x));
});

Deno.test("an in-place op on a Function's output that is a reshape of its input is refused", async () => {
  class Flat extends Function {
    static override forward(_ctx: FunctionCtx, x: Tensor): Tensor {
      return x.reshape([-1]);
    }
    static override backward(_ctx: FunctionCtx, g: Tensor): Tensor {
      return g.reshape([2, 2]);
    }
  }
  const x = tensor([[1, 2], [3, 4]], { requiresGrad: true });
  const y = Flat.apply(x) as Tensor;
  assert.throws(() => y.mul_(10), /mul_: a tensor .*reshape view/);
  assert.deepEqual(Array.from(await x.data()), [1, 2, 3, 4], "the leaf is unchanged");
});
