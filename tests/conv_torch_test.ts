/**
 * Convolution, pooling and padding against PyTorch 1.13's numbers
 * (tests/fixtures/torch_reference.json, key `conv`) on every backend:
 * forward and the gradients of input, weight and bias.
 * @module
 */

import { type Device, nn, type Tensor, tensor } from "../mod.ts";
import fixtures from "./fixtures/torch_reference.json" with { type: "json" };
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
