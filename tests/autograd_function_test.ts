/**
 * `Function`'s ctx API beyond saving tensors, as PyTorch's
 * `torch.autograd.Function`: non-differentiable outputs, unmaterialized
 * gradients, PyTorch 2's `setupContext`, gradients summed to the input's
 * shape, and `onceDifferentiable`. The expected numbers are the
 * derivatives worked by hand (PyTorch 1.13 gives the same for these inputs).
 * @module
 */

import assert from "node:assert/strict";
import { autograd, Function, type FunctionCtx, stack, type Tensor, tensor } from "../mod.ts";
import { backendTest } from "./harness.ts";

const { onceDifferentiable } = autograd;

/** The gradients SortWithIndices' backward got for its indices. */
const indexGrads: Tensor[] = [];

/** Sorted values and their indices; only the values are differentiable. */
class SortWithIndices extends Function {
  static override forward(ctx: FunctionCtx, x: Tensor): Tensor[] {
    const [values, indices] = x.sort(0);
    ctx.saveForBackward(indices);
    ctx.markNonDifferentiable(indices);
    return [values, indices];
  }
  static override backward(ctx: FunctionCtx, gValues: Tensor, gIndices: Tensor): Tensor {
    indexGrads.push(gIndices);
    const [indices] = ctx.savedTensors;
    return gValues.zerosLike().scatter(0, indices, gValues);
  }
}

backendTest(
  "markNonDifferentiable: the indices need no grad and backward gets zeros for them",
  async (device) => {
    const x = tensor([3, 1, 2], { device, requiresGrad: true });
    const [values, indices] = SortWithIndices.apply(x);
    assert.equal(values.requiresGrad, true);
    assert.equal(indices.requiresGrad, false);
    assert.equal(indices.gradFn, null);
    values.mul(tensor([1, 10, 100], { device })).sum().backward();
    // values = [1, 2, 3] from x[1], x[2], x[0]: d/dx = [100, 1, 10].
    assert.deepEqual(Array.from(await x.grad!.data()), [100, 1, 10]);
  },
);

/** Two outputs; backward logs which gradients arrived. */
function twoOutputs(materialize: boolean, log: string[]) {
  return class TwoOutputs extends Function {
    static override forward(ctx: FunctionCtx, x: Tensor): Tensor[] {
      ctx.setMaterializeGrads(materialize);
      return [x.mul(2), x.mul(3)];
    }
    static override backward(_ctx: FunctionCtx, a: Tensor | null, b: Tensor | null): Tensor {
      log.push(`${a === null ? "null" : "tensor"},${b === null ? "null" : "tensor"}`);
      return a!.mul(2).add(b === null ? 0 : b.mul(3));
    }
  };
}

backendTest(
  "setMaterializeGrads(false): an output no gradient reached arrives as null",
  async (device) => {
    const log: string[] = [];
    for (const materialize of [true, false]) {
      const x = tensor([1, 2], { device, requiresGrad: true });
      const [a] = twoOutputs(materialize, log).apply(x);
      a.sum().backward();
      assert.deepEqual(Array.from(await x.grad!.data()), [2, 2]);
    }
    assert.deepEqual(log, ["tensor,tensor", "tensor,null"]);
  },
);

/** PyTorch 2's style: forward without ctx, setupContext saves what backward needs. */
class MulAdd extends Function {
  static override forward(x: Tensor, y: Tensor, scale: number): Tensor {
    return x.mul(y).add(scale);
  }
  static override setupContext(ctx: FunctionCtx, inputs: unknown[], _output: Tensor): void {
    const [x, y] = inputs as [Tensor, Tensor];
    ctx.saveForBackward(x, y);
  }
  static override backward(ctx: FunctionCtx, g: Tensor): (Tensor | null)[] {
    const [x, y] = ctx.savedTensors;
    return [g.mul(y), g.mul(x), null];
  }
}

backendTest(
  "setupContext: forward takes the inputs alone, setupContext gets ctx, inputs and output",
  async (device) => {
    const x = tensor([1, 2], { device, requiresGrad: true });
    const y = tensor([3, 5], { device, requiresGrad: true });
    const out = MulAdd.apply(x, y, 0.5);
    assert.deepEqual(Array.from(await out.data()), [3.5, 10.5]);
    out.sum().backward();
    assert.deepEqual(Array.from(await x.grad!.data()), [3, 5]);
    assert.deepEqual(Array.from(await y.grad!.data()), [1, 2]);
  },
);

/** Returns its gradient as two rows [g, 10 g] (shape [2, ...g's shape]). */
class TwoRows extends Function {
  static override forward(_ctx: FunctionCtx, x: Tensor): Tensor {
    return x.mul(1);
  }
  static override backward(_ctx: FunctionCtx, g: Tensor): Tensor {
    return stack([g, g.mul(10)]);
  }
}

backendTest(
  "a gradient of a shape the input broadcasts to is summed to the input's shape; another is an error",
  async (device) => {
    const x = tensor([1, 2, 3], { device, requiresGrad: true });
    TwoRows.apply(x).mul(tensor([1, 2, 3], { device })).sum().backward();
    // Rows [g, 10 g] summed over the leading dim: 11 g.
    assert.deepEqual(Array.from(await x.grad!.data()), [11, 22, 33]);
    // A [1, 2] input's gradient of shape [2, 1, 2] is summed over the new leading dim.
    const w = tensor([[1, 2]], { device, requiresGrad: true });
    TwoRows.apply(w).sum().backward();
    assert.deepEqual(Array.from(await w.grad!.data()), [11, 11]);
    const z = tensor([[1], [2]], { device, requiresGrad: true });
    class Wrong extends TwoRows {
      static override backward(_ctx: FunctionCtx, g: Tensor): Tensor {
        return g.reshape([1, 2]);
      }
    }
    assert.throws(
      () => Wrong.apply(z).sum().backward(),
      /Wrong\.backward returned a gradient of shape \[1, 2\] for input 0 of shape \[2, 1\]/,
    );
  },
);

class Cube extends Function {
  static override forward(ctx: FunctionCtx, x: Tensor): Tensor {
    ctx.saveForBackward(x);
    return x.mul(x).mul(x);
  }
  @onceDifferentiable
  static override backward(ctx: FunctionCtx, g: Tensor): Tensor {
    const [x] = ctx.savedTensors;
    return g.mul(x).mul(x).mul(3);
  }
}

backendTest(
  "onceDifferentiable: first derivatives as usual; a second through it is an error naming the Function",
  async (device) => {
    const x = tensor([1, 2], { device, requiresGrad: true });
    const [g] = autograd.grad([Cube.apply(x).sum()], [x]);
    assert.deepEqual(Array.from(await g!.data()), [3, 12]);
    // The incoming gradient (2 y) depends on x, so the result of backward would too.
    const y = Cube.apply(x);
    const [gg] = autograd.grad([y.mul(y).sum()], [x], { createGraph: true });
    // d(y^2)/dx = 2 y · 3 x^2 = 6 x^5: [6, 192].
    assert.deepEqual(Array.from(await gg!.data()), [6, 192]);
    assert.throws(
      () => gg!.sum().backward(),
      /Cube: trying to differentiate twice a backward marked with onceDifferentiable/,
    );
  },
);
