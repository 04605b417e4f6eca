/**
 * Ops that ported PyTorch programs reached for and that were missing:
 * `triu` / `tril` (causal masks) and `var` / `std` equal to PyTorch 1.13 on
 * every backend with their gradients, float64 gradient checks on cpu,
 * `arange(n, { device })`, `zerosLike` and the other `torch.*_like` factories.
 * @module
 */

import assert from "node:assert/strict";
import {
  arange,
  fullLike,
  logsumexp,
  manualSeed,
  nn,
  ones,
  onesLike,
  randLike,
  randn,
  randnLike,
  std,
  type Tensor,
  tensor,
  tril,
  triu,
  var as variance,
  zerosLike,
} from "../mod.ts";
import {
  assertTensor,
  backendTest,
  decodeFixture,
  fixtureTensor,
  matchesCpu,
  on,
} from "./harness.ts";
import { check, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_programs.json" with { type: "json" };

for (const c of fixtures.triangle) {
  backendTest(`${c.op}(x, ${c.diagonal}) and its gradient equal PyTorch`, async (device) => {
    const x = fixtureTensor(c.x, device, { requiresGrad: true });
    const out = c.op === "triu" ? x.triu(c.diagonal) : tril(x, c.diagonal);
    await assertTensor(out, decodeFixture(c.out), {
      atol: 0,
      rtol: 0,
      what: "output",
      shape: [2, 3, 4],
    });
    out.mul(fixtureTensor(c.g, device)).sum().backward();
    await assertTensor(x.grad!, c.grad, { atol: 0, rtol: 0, what: "gradient" });
  });
}

backendTest("triu/tril: int32 masks (a causal mask) and every backend as cpu", async (device) => {
  const causal = ones([3, 3], { dtype: "int32", device }).triu(1);
  assert.equal(causal.dtype, "int32");
  assert.deepEqual(await causal.toArray(), [[0, 1, 1], [0, 0, 1], [0, 0, 0]]);
  const vals = Array.from({ length: 30 }, (_, i) => i - 7);
  await matchesCpu(
    device,
    (d) => [triu(on(d, [5, 6], vals.slice(0, 30)), -2), on(d, [1, 5, 6], vals).tril(3)],
    { exact: true },
  );
});

backendTest("triu/tril: errors name the op and the shape", (device) => {
  assert.throws(
    () => on(device, [4], [1, 2, 3, 4]).triu(),
    /triu: needs 2 dims or more, got \[4\]/,
  );
  assert.throws(
    () => ones([2, 2], { device }).tril(0.5),
    /tril: non-integer diagonal 0.5/,
  );
});

check("triu", (x: Tensor) => x.triu(1), [inp([3, 4], 1330)]);
check("tril batched", (x: Tensor) => tril(x, -1), [inp([2, 4, 3], 1331)]);

backendTest(
  "arange takes its options after any argument, as torch.arange(n, device=...)",
  async (device) => {
    const a = arange(4, { device });
    assert.equal(a.device, device);
    assert.deepEqual(await a.toArray(), [0, 1, 2, 3]);
    const b = arange(1, 3, { device, dtype: "float32" });
    assert.deepEqual([b.device, b.dtype, await b.toArray()], [device, "float32", [1, 2]]);
    const c = arange(0, 1, 0.5, { device });
    assert.deepEqual([c.device, await c.toArray()], [device, [0, 0.5]]);
  },
);

backendTest(
  "crossEntropy with float class labels (PyTorch's int64 habit) says to make them int32",
  (device) => {
    const logits = ones([3, 4], { device });
    const labels = tensor([0, 1, 2], { device }); // float32 here, int64 in PyTorch
    assert.throws(
      () => nn.functional.crossEntropy(logits, labels),
      /probability target of shape \[3\] must match input of shape \[3, 4\]; for class indices make the target int32/,
    );
    // A probability target of another wrong shape gets no such hint.
    assert.throws(
      () => nn.functional.crossEntropy(logits, ones([3, 5], { device })),
      (e: Error) => /must match input of shape \[3, 4\]$/.test(e.message),
    );
  },
);

for (const c of fixtures.variance) {
  const dim = c.dim === null ? undefined : c.dim;
  const options = { unbiased: c.unbiased, keepdim: c.keepdim };
  backendTest(
    `${c.op}(x, ${JSON.stringify(dim)}, ${JSON.stringify(options)}) equals PyTorch`,
    async (device) => {
      const x = fixtureTensor(c.x, device, { requiresGrad: true });
      const out = c.op === "var" ? x.var(dim, options) : std(x, dim, options);
      const tol = device.backend === "cpu"
        ? { atol: 1e-6, rtol: 1e-6 }
        : { atol: 1e-5, rtol: 1e-5 };
      await assertTensor(out, c.out, { ...tol, what: "output", shape: c.shape });
      out.mul(fixtureTensor(c.g, device)).sum().backward();
      await assertTensor(x.grad!, c.grad, { ...tol, what: "gradient" });
    },
  );
}

backendTest(
  "var/std: one element gives NaN unbiased (0/0, as PyTorch); int32 is refused",
  async (device) => {
    assert.ok(Number.isNaN(await on(device, [1], [2]).var().item()));
    assert.equal(await on(device, [1], [2]).std(0, { unbiased: false }).item(), 0);
    assert.throws(() => variance(ones([2], { dtype: "int32", device })), /var: .*int32/);
  },
);

check("var over dims 0 and 2, unbiased", (x: Tensor) => variance(x, [0, 2]), [
  inp([3, 2, 4], 1340),
]);
check(
  "std over the last dim, biased, keepdim",
  (x: Tensor) => x.std(-1, { unbiased: false, keepdim: true }),
  [
    inp([3, 5], 1341),
  ],
);

backendTest(
  "zerosLike, onesLike, fullLike, randLike, randnLike: t's shape, dtype, device",
  async (device) => {
    const t = randn([2, 3], { device, requiresGrad: true });
    const i = tensor([[1, 2]], { dtype: "int32", device });
    for (
      const [made, value] of [[zerosLike(t), 0], [onesLike(i), 1], [fullLike(i, 7), 7]] as const
    ) {
      assert.equal(made.device, device);
      assert.equal(made.requiresGrad, false, "requiresGrad is not copied, as PyTorch");
      assert.ok((await made.data()).every((v) => v === value));
    }
    assert.deepEqual([...onesLike(i).shape, onesLike(i).dtype], [1, 2, "int32"]);
    const f = zerosLike(i, { dtype: "float32" });
    assert.deepEqual([f.dtype, [...f.shape]], ["float32", [1, 2]]);
    manualSeed(5);
    const r = randnLike(t);
    manualSeed(5);
    assert.deepEqual(await r.toArray(), await randn([2, 3], { device }).toArray());
    assert.deepEqual([...randLike(t).shape], [2, 3]);
    assert.throws(() => randLike(i), /rand: dtype must be float, got int32/);
  },
);

for (const c of fixtures.logsumexp) {
  backendTest(
    `logsumexp(x, ${
      JSON.stringify(c.dim)
    }, ${c.keepdim}) equals PyTorch, ±inf and exp overflow included`,
    async (device) => {
      const x = fixtureTensor(c.x, device, { requiresGrad: true });
      const out = c.keepdim ? x.logsumexp(c.dim, true) : logsumexp(x, c.dim);
      const tol = device.backend === "cpu"
        ? { atol: 1e-5, rtol: 1e-6 }
        : { atol: 1e-4, rtol: 1e-5 };
      await assertTensor(out, decodeFixture(c.out), { ...tol, what: "output", shape: c.shape });
      out.mul(fixtureTensor(c.g, device)).sum().backward();
      await assertTensor(x.grad!, decodeFixture(c.grad), { ...tol, what: "gradient" });
    },
  );
}

check("logsumexp over dims 0 and 2, keepdim", (x: Tensor) => x.logsumexp([0, 2], true), [
  inp([2, 3, 4], 1380),
]);
check("logsumexp of a 0-d tensor", (x: Tensor) => logsumexp(x.sum(), 0), [inp([3], 1381)]);
