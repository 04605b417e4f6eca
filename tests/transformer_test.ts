/**
 * TransformerEncoderLayer / TransformerEncoder: a PyTorch 1.13 state dict
 * loads unchanged (same keys, same order) and gives PyTorch's output and the
 * gradients of the input and of every parameter (post-norm with bool causal
 * and key-padding masks, pre-norm with a float mask and a final norm) on
 * every backend; copies are independent; float64 gradient check on cpu;
 * errors.
 * @module
 */

import assert from "node:assert/strict";
import { nn, type Tensor, tensor } from "../mod.ts";
import { assertTensor, backendTest, fixtureTensor } from "./harness.ts";
import { check, CPU0, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_programs.json" with { type: "json" };

type Values = Parameters<typeof fixtureTensor>[0];

for (const c of fixtures.transformer_encoder) {
  backendTest(`TransformerEncoder (${c.name}) equals PyTorch`, async (device) => {
    const layer = new nn.TransformerEncoderLayer(8, 2, {
      dimFeedforward: 16,
      dropout: 0,
      batchFirst: true,
      activation: c.options.activation as "relu" | "gelu",
      normFirst: c.options.norm_first ?? false,
      device,
    });
    const norm = c.masks === "float" ? new nn.LayerNorm(8, { device }) : null;
    const model = new nn.TransformerEncoder(layer, 2, { norm });
    assert.deepEqual(
      Object.keys(model.stateDict()),
      Object.keys(c.state),
      "PyTorch's keys, in order",
    );
    const sd: Record<string, Tensor> = {};
    for (const [k, v] of Object.entries(c.state)) sd[k] = fixtureTensor(v as Values, device);
    model.loadStateDict(sd);
    const x = fixtureTensor(c.x, device, { requiresGrad: true });
    const out = c.masks === "bool"
      ? model.forward(x, {
        mask: fixtureTensor(c.mask, device, { dtype: "int32" }),
        srcKeyPaddingMask: fixtureTensor(c.pad!, device, { dtype: "int32" }),
      })
      : model.forward(x, { mask: fixtureTensor(c.mask, device) });
    const tol = device.backend === "cpu" ? { atol: 1e-5, rtol: 1e-5 } : { atol: 1e-4, rtol: 1e-4 };
    await assertTensor(out, c.out, { ...tol, what: "output", shape: [3, 5, 8] });
    out.mul(fixtureTensor(c.g, device)).sum().backward();
    await assertTensor(x.grad!, c.x_grad, { ...tol, what: "input gradient" });
    for (const [name, p] of model.namedParameters()) {
      await assertTensor(p.grad!, (c.grads as Record<string, Values>)[name] as number[], {
        ...tol,
        what: `${name} gradient`,
      });
    }
  });
}

Deno.test("TransformerEncoder: each layer is an independent copy of the one given", async () => {
  const layer = new nn.TransformerEncoderLayer(4, 2, { dimFeedforward: 8 });
  const model = new nn.TransformerEncoder(layer, 3);
  const layers = [...model.layers] as nn.TransformerEncoderLayer[];
  assert.equal(layers.length, 3);
  assert.equal(model.parameters().length, 3 * layer.parameters().length);
  const weights = [layer, ...layers].map((l) => l.linear1.weight);
  assert.equal(new Set(weights.map((w) => w.storage)).size, 4, "own storage each");
  for (const w of weights.slice(1)) {
    assert.deepEqual(await w.toArray(), await layer.linear1.weight.toArray());
  }
  assert.ok(
    layers.every((l) => l.linear1.weight instanceof nn.Parameter && l.linear1.weight.requiresGrad),
  );
});

Deno.test("TransformerEncoderLayer: errors name the option", async () => {
  assert.throws(
    () => new nn.TransformerEncoderLayer(4, 2, { activation: "tanh" as "relu" }),
    /TransformerEncoderLayer: activation must be "relu", "gelu" or a function, got "tanh"/,
  );
  assert.throws(
    () => new nn.TransformerEncoderLayer(4, 2, { dimFeedforward: 0 }),
    /TransformerEncoderLayer: dimFeedforward must be a positive integer, got 0/,
  );
  assert.throws(() => new nn.TransformerEncoderLayer(6, 4), /MultiheadAttention/);
  const layer = new nn.TransformerEncoderLayer(4, 2);
  assert.throws(
    () => new nn.TransformerEncoder(layer, -1),
    /TransformerEncoder: numLayers must be a non-negative integer, got -1/,
  );
  // No layers, as PyTorch allows: the input comes back as it is.
  const x = tensor([[[1, 2, 3, 4]]]);
  assert.deepEqual(await new nn.TransformerEncoder(layer, 0).forward(x).toArray(), [[[
    1,
    2,
    3,
    4,
  ]]]);
});

const layer64 = new nn.TransformerEncoderLayer(4, 2, {
  dimFeedforward: 6,
  dropout: 0,
  normFirst: true,
  activation: "gelu",
  dtype: "float64",
  device: CPU0,
});
check(
  "TransformerEncoderLayer (pre-norm, gelu) input gradient",
  (x: Tensor) => layer64.forward(x),
  [
    inp([3, 2, 4], 1352),
  ],
);
