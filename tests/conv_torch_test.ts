/**
 * Convolution, pooling and padding against PyTorch 1.13's numbers
 * (tests/fixtures/torch_reference.json, key `conv`; torch_layers.json, key
 * `conv_padding` for the layers' padding modes) on every backend: forward
 * and the gradients of input, weight and bias.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, nn, type Tensor, tensor } from "../mod.ts";
import fixtures from "./fixtures/torch_reference.json" with { type: "json" };
import layerFixtures from "./fixtures/torch_layers.json" with { type: "json" };
import { assertTensor, backendTest } from "./harness.ts";

const F = nn.functional;
const C = fixtures.conv;
type Nested = number | Nested[];

function shapeOf(values: Nested): number[] {
  return Array.isArray(values) ? [values.length, ...shapeOf(values[0])] : [];
}

function t(d: Device, values: Nested): Tensor {
  return tensor((values as number[]).flat(Infinity as 1) as number[], {
    shape: shapeOf(values),
    device: d,
    requiresGrad: true,
  });
}

const TOL = { atol: 2e-5, rtol: 1e-4 };

/** Runs `fn` on the fixture's input(s) and checks output and gradients. */
async function check(
  d: Device,
  what: string,
  inputs: Nested[],
  fn: (...xs: Tensor[]) => Tensor,
  want: { output: Nested; g: Nested; grads: (Nested | null)[] },
): Promise<void> {
  const xs = inputs.map((v) => t(d, v));
  const out = fn(...xs);
  await assertTensor(out, (want.output as number[]).flat(Infinity as 1) as number[], {
    ...TOL,
    shape: shapeOf(want.output),
    what: `${what} output`,
  });
  out.mul(t(d, want.g)).sum().backward();
  for (const [i, g] of want.grads.entries()) {
    if (g === null) continue;
    await assertTensor(xs[i].grad!, (g as number[]).flat(Infinity as 1) as number[], {
      ...TOL,
      what: `${what} grad ${i}`,
    });
  }
}

for (const c of C.conv2d) {
  backendTest(`torch conv2d ${c.name}`, async (d) => {
    const inputs = [c.input, c.weight, ...(c.bias ? [c.bias] : [])] as Nested[];
    await check(
      d,
      c.name,
      inputs,
      (x, w, b) => F.conv2d(x, w, b, c.options as nn.functional.Conv2dOptions),
      {
        output: c.output,
        g: c.g,
        grads: [c.grad_input, c.grad_weight, c.grad_bias] as (Nested | null)[],
      },
    );
  });
}

backendTest("torch conv1d stride 2 padding 1 dilation 2", async (d) => {
  const c = C.conv1d;
  await check(d, "conv1d", [c.input, c.weight, c.bias], (x, w, b) => F.conv1d(x, w, b, c.options), {
    output: c.output,
    g: c.g,
    grads: [c.grad_input, c.grad_weight, c.grad_bias],
  });
});

for (const p of C.pool) {
  backendTest(`torch ${p.kind}Pool2d ${p.name}`, async (d) => {
    const o = p.options as Record<string, unknown>;
    const kernel = p.kernel as number | [number, number];
    const fn = p.kind === "max"
      ? (x: Tensor) =>
        F.maxPool2d(x, kernel, {
          stride: o.stride as number | [number, number] | undefined,
          padding: o.padding as number | undefined,
          dilation: o.dilation as number | undefined,
          ceilMode: o.ceil_mode as boolean | undefined,
        })
      : (x: Tensor) =>
        F.avgPool2d(x, kernel, {
          stride: o.stride as number | [number, number] | undefined,
          padding: o.padding as number | undefined,
          ceilMode: o.ceil_mode as boolean | undefined,
          countIncludePad: o.count_include_pad as boolean | undefined,
          divisorOverride: o.divisor_override as number | undefined,
        });
    await check(d, p.name, [p.input], fn, { output: p.output, g: p.g, grads: [p.grad_input] });
  });
}

for (const a of C.adaptive_avg_pool2d) {
  backendTest(`torch adaptiveAvgPool2d to ${JSON.stringify(a.output_size)}`, async (d) => {
    const size = a.output_size as number | [number | null, number | null];
    await check(d, "adaptive", [a.input], (x) => F.adaptiveAvgPool2d(x, size), {
      output: a.output,
      g: a.g,
      grads: [a.grad_input],
    });
  });
}

for (const p of C.pad) {
  backendTest(`torch pad ${p.mode} ${JSON.stringify(p.pad)}`, async (d) => {
    const mode = p.mode as "constant" | "reflect" | "replicate";
    await check(d, "pad", [p.input], (x) => F.pad(x, p.pad, { mode, value: p.value }), {
      output: p.output,
      g: p.g,
      grads: [p.grad_input],
    });
  });
}

backendTest(
  "torch BatchNorm2d: two training steps (running stats, momentum 0.2), then eval",
  async (d) => {
    const c = C.batch_norm2d;
    const bn = new nn.BatchNorm2d(3, { momentum: c.momentum, device: d });
    bn.loadStateDict(
      Object.fromEntries(
        Object.entries(bn.stateDict()).map(([k, v]) =>
          k in c.params
            ? [k, tensor((c.params as Record<string, number[]>)[k], { device: d })]
            : [k, v]
        ),
      ),
    );
    for (const [i, s] of c.train_steps.entries()) {
      await check(d, `step ${i}`, [s.input], (x) => bn.forward(x), {
        output: s.output,
        g: s.g,
        grads: [s.grad_input],
      });
      await assertTensor(bn.runningMean!, s.running_mean, { ...TOL, what: `running_mean ${i}` });
      await assertTensor(bn.runningVar!, s.running_var, { ...TOL, what: `running_var ${i}` });
    }
    await assertTensor(bn.numBatchesTracked!, [2]);
    bn.eval();
    const out = bn.forward(t(d, c.eval.input));
    await assertTensor(out, (c.eval.output as Nested[]).flat(Infinity as 1) as number[], TOL);
    assert.throws(() => bn.forward(t(d, [[1, 2, 3]])), /4D \[N, C, H, W\]/);
  },
);

backendTest("torch GroupNorm(2, 6): forward and gradients of input, weight, bias", async (d) => {
  const c = C.group_norm;
  const gn = new nn.GroupNorm(c.num_groups, 6, { device: d });
  gn.weight!._assign(tensor(c.params.weight, { device: d }));
  gn.bias!._assign(tensor(c.params.bias, { device: d }));
  const x = t(d, c.input);
  const out = gn.forward(x);
  await assertTensor(out, (c.output as Nested[]).flat(Infinity as 1) as number[], TOL);
  out.mul(t(d, c.g)).sum().backward();
  await assertTensor(x.grad!, (c.grad_input as Nested[]).flat(Infinity as 1) as number[], TOL);
  await assertTensor(gn.weight!.grad!, c.grad_weight, TOL);
  await assertTensor(gn.bias!.grad!, c.grad_bias, TOL);
});

backendTest(
  "Conv2d/Conv1d modules: PyTorch's init bounds, state-dict keys, shapes, repr",
  async (d) => {
    const conv = new nn.Conv2d(6, 8, 3, { padding: 1, groups: 2, device: d });
    assert.deepEqual(Object.keys(conv.stateDict()), ["weight", "bias"]);
    assert.deepEqual([...conv.weight.shape], [8, 3, 3, 3]);
    // kaiming-uniform with a = √5: U(-1/√fanIn, 1/√fanIn), fanIn = 3·3·3.
    const bound = 1 / Math.sqrt(27);
    const w = await conv.weight.data();
    assert.ok(w.every((v) => Math.abs(v) <= bound), "weights within 1/sqrt(fan_in)");
    assert.ok(Math.max(...w.map(Math.abs)) > 0.8 * bound, "weights fill the range");
    assert.ok((await conv.bias!.data()).every((v) => Math.abs(v) <= bound));
    const y = conv.forward(
      t(d, new Array(2).fill(new Array(6).fill(new Array(5).fill([1, 2, 3, 4])))),
    );
    assert.deepEqual([...y.shape], [2, 8, 5, 4]);
    assert.deepEqual(
      conv.extraRepr(),
      "6, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), groups=2",
    );
    const c1 = new nn.Conv1d(2, 4, 5, { stride: 2, bias: false, device: d });
    assert.deepEqual(c1.bias, null);
    assert.deepEqual(c1.extraRepr(), "2, 4, kernel_size=(5,), stride=(2,), bias=False");
    assert.deepEqual(
      [...c1.forward(t(d, [[[1, 2, 3, 4, 5, 6, 7], [0, 1, 0, 1, 0, 1, 0]]])).shape],
      [
        1,
        4,
        2,
      ],
    );
    const pool = new nn.MaxPool2d(2);
    assert.deepEqual(
      pool.extraRepr(),
      "kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False",
    );
    assert.deepEqual(new nn.AdaptiveAvgPool2d([1, null]).extraRepr(), "output_size=(1, None)");
  },
);

for (const c of layerFixtures.conv_padding) {
  backendTest(
    `torch ${c.name}: Conv${c.rank}d paddingMode "${c.options.paddingMode}"`,
    async (d) => {
      const conv = c.rank === 2
        ? new nn.Conv2d(2, 3, 3, { ...(c.options as nn.Conv2dModuleOptions), device: d })
        : new nn.Conv1d(2, 3, 3, { ...(c.options as nn.Conv1dModuleOptions), device: d });
      // PyTorch's repr: `Conv2d(2, 3, kernel_size=..., padding_mode=reflect)`.
      assert.equal(`${conv.constructor.name}(${conv.extraRepr()})`, c.repr);
      conv.loadStateDict({ weight: t(d, c.weight), bias: t(d, c.bias) });
      await check(d, c.name, [c.input], (x) => conv.forward(x), {
        output: c.output,
        g: c.g,
        grads: [c.grads.input],
      });
      await assertTensor(
        conv.weight.grad!,
        (c.grads.weight as Nested[]).flat(Infinity as 1) as number[],
        {
          ...TOL,
          what: `${c.name} weight grad`,
        },
      );
      await assertTensor(conv.bias!.grad!, c.grads.bias, { ...TOL, what: `${c.name} bias grad` });
    },
  );
}

backendTest("conv paddingMode: an unknown mode and too much circular padding are errors", (d) => {
  assert.throws(
    () => new nn.Conv2d(1, 1, 3, { paddingMode: "mirror" as nn.PaddingMode, device: d }),
    /Conv2d: paddingMode must be one of "zeros", "reflect", "replicate", "circular", got "mirror"/,
  );
  assert.throws(
    () => F.pad(t(d, [[[1, 2]]]), [3, 0], { mode: "circular" }),
    /circular padding \(3, 0\) must be at most the size 2 of dim 2/,
  );
});
