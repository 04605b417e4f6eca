/**
 * Review of the in-place audit: ops that PyTorch 1.13 returns as new tensors
 * (`pixel_unshuffle`, `fold`) must let the caller change the result in place
 * (gradient as the out-of-place op's) and leave the caller's input
 * changeable in place, as `pixel_shuffle` and `unfold` already do.
 * @module
 */

import assert from "node:assert/strict";
import { nn, type Tensor } from "../mod.ts";
import { assertClose, backendTest, floats, on } from "./harness.ts";

const F = nn.functional;

backendTest(
  "pixelUnshuffle and fold: in place on the result and on the input, as PyTorch",
  async (d) => {
    const cases: [string, number[], (x: Tensor) => Tensor][] = [
      ["pixelUnshuffle", [1, 2, 4, 4], (x) => F.pixelUnshuffle(x, 2)],
      ["pixelUnshuffle by 1", [2, 2, 2], (x) => F.pixelUnshuffle(x, 1)],
      ["fold", [1, 4, 4], (x) => F.fold(x, [3, 3], 2)],
      ["fold unbatched", [4, 4], (x) => F.fold(x, [3, 3], 2)],
    ];
    for (const [name, shape, f] of cases) {
      // The input's gradient with result.mul_(3) equals the one with result.mul(3).
      const grad = async (inPlace: boolean) => {
        const leaf = on(d, shape, floats(shape, 3)).requiresGrad_();
        const r = f(leaf.mul(1));
        const out = inPlace ? r.mul_(3) : r.mul(3);
        out.mul(out).sum().backward();
        return Array.from(await leaf.grad!.data());
      };
      assertClose(await grad(true), await grad(false), { atol: 1e-5, what: name });
      // The input, a non-leaf, stays changeable in place after the op (no view of it came out).
      const x = on(d, shape, floats(shape, 4)).requiresGrad_().mul(1);
      f(x);
      x.add_(1);
      assert.ok(x.requiresGrad, name);
    }
  },
);
