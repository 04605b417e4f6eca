/**
 * nn.NLLLoss2d, PyTorch 1.13's deprecated name of NLLLoss, against PyTorch's
 * (the fixture `torch_nll_loss2d.json`): [N, C, H, W] log-probabilities, each
 * reduction, class weights, ignoreIndex, the input's gradient.
 * @module
 */

import assert from "node:assert/strict";
import { nn, tensor } from "../mod.ts";
import fx from "./fixtures/torch_nll_loss2d.json" with { type: "json" };
import { assertFixture, backendTest, fixtureTensor } from "./harness.ts";

backendTest(
  "nn.NLLLoss2d is NLLLoss: PyTorch's losses and gradients on [N, C, H, W]",
  async (d) => {
    for (const [k, c] of fx.cases.entries()) {
      const what = `case ${k} (${c.reduction}, ignoreIndex ${c.ignore_index})`;
      const loss = new nn.NLLLoss2d({
        weight: c.weight ? tensor(c.weight, { device: d }) : undefined,
        ignoreIndex: c.ignore_index,
        reduction: c.reduction as "mean" | "sum" | "none",
      });
      assert.ok(loss instanceof nn.NLLLoss, what);
      const x = fixtureTensor(c.input, d, { requiresGrad: true });
      const out = loss.forward(x, fixtureTensor(c.target, d, { dtype: "int32" }));
      await assertFixture(out, c.output, { atol: 1e-5, rtol: 1e-5, what });
      out.backward(fixtureTensor(c.seed_grad, d));
      await assertFixture(x.grad, c.grad, { atol: 1e-6, rtol: 1e-5, what: `${what} grad` });
    }
    assert.equal(String(new nn.NLLLoss2d()), fx.cases[0].repr);
  },
);
