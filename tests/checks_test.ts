/**
 * Inputs that used to give a silently wrong number give PyTorch's value or a
 * clear error instead, on every backend (issue 10, section 3).
 * @module
 */

import assert from "node:assert/strict";
import { arange, full, manualSeed, nn, optim, type Tensor, tensor } from "../mod.ts";
import { assertClose, backendTest } from "./harness.ts";

function throwsWith(fn: () => unknown, ...parts: string[]): void {
  assert.throws(fn, (error: Error) => {
    for (const part of parts) {
      assert.ok(error.message.includes(part), `"${part}" in: ${error.message}`);
    }
    return true;
  });
}

// ---- version counters: a saved tensor changed in place before backward ----

backendTest(
  "a parameter saved for backward and stepped before backward is an error naming the op",
  (d) => {
    const w = new nn.Parameter(tensor([2], { device: d }));
    const loss = w.mul(w).mul(3).sum();
    const opt = new optim.SGD([w], { lr: 0.1 });
    w.grad = tensor([100], { device: d });
    opt.step();
    // PyTorch: "one of the variables needed for gradient computation has been
    // modified by an inplace operation"; the gradient would have been -588.
    throwsWith(
      () => loss.backward(),
      "mul backward",
      "a parameter or buffer",
      "modified in place",
      "version 1",
    );
  },
);

backendTest("_assign and a fused Adam step between forward and backward are caught too", (d) => {
  const x = tensor([1, 2], { device: d, requiresGrad: true });
  const y = x.exp();
  const loss = y.mul(y).sum();
  y._assign(tensor([0, 0], { device: d }));
  throwsWith(() => loss.backward(), "mul backward", "a tensor it saved", "float32, 2 elements");
  const w = new nn.Parameter(tensor([1, -1], { device: d }));
  const l2 = w.mul(w).sum();
  l2.backward(undefined, { retainGraph: true });
  new optim.Adam([w], { lr: 0.1 }).step();
  throwsWith(() => l2.backward(), "mul backward", "version");
});

backendTest(
  "ops that save nothing, and changes made before the op, are fine (as PyTorch)",
  async (d) => {
    const w = tensor([2, 3], { device: d, requiresGrad: true });
    w._assign(tensor([4, 5], { device: d })); // before the forward: fine
    const loss = w.mul(w).sum().add(w.add(1).sum());
    const v = tensor([1], { device: d, requiresGrad: true });
    const l2 = v.add(1).reshape([1]).sum(); // add and reshape save no input
    v._assign(tensor([7], { device: d }));
    loss.backward();
    l2.backward();
    assertClose(await w.grad!.data(), [9, 11]);
    assertClose(await v.grad!.data(), [1]);
  },
);

backendTest("the training loop order (backward, then step) never trips the check", async (d) => {
  const lin = new nn.Linear(3, 2).to(d);
  const opt = new optim.Adam(lin.parameters(), { lr: 0.01 });
  const x = tensor([[1, 2, 3]], { device: d });
  for (let i = 0; i < 3; i++) {
    opt.zeroGrad();
    const out: Tensor = lin.forward(x).sum();
    out.backward();
    opt.step();
  }
  assert.equal((await lin.weight.data()).length, 6);
});

// ---- cross entropy: out-of-range targets ----

backendTest(
  "crossEntropy: a target out of range is an error naming it and the class count",
  async (d) => {
    const logits = tensor([[1, 0], [0, 1]], { device: d });
    for (const bad of [5, -1]) {
      const loss = new nn.CrossEntropyLoss().forward(
        logits,
        tensor([0, bad], { dtype: "int32", device: d }),
      );
      await assert.rejects(() => loss.item(), (e: Error) => {
        for (const part of [`class index ${bad} `, "2 classes", "ignoreIndex -100"]) {
          assert.ok(e.message.includes(part), `"${part}" in: ${e.message}`);
        }
        return true;
      });
    }
    // An ignored target is not out of range, and the device goes on working.
    const ok = nn.functional.crossEntropy(logits, tensor([7, 1], { dtype: "int32", device: d }), {
      ignoreIndex: 7,
    });
    assertClose(await ok.item(), [Math.log(1 + Math.E) - 1], { rtol: 1e-5 });
    throwsWith(
      () =>
        nn.functional.crossEntropy(logits, tensor([0, 1], { dtype: "int32", device: d }), {
          ignoreIndex: 0.5,
        }),
      "ignoreIndex must be an integer",
    );
  },
);

// ---- indexSelect: indices out of range ----

backendTest("indexSelect: an index out of range is an error naming it and the size", async (d) => {
  const x = tensor([[1, 2], [3, 4], [5, 6], [7, 8]], { device: d });
  // Indices from the host: at once.
  for (const bad of [10, -7, 4]) {
    throwsWith(
      () => x.indexSelect(0, tensor([0, bad], { dtype: "int32", device: d })),
      `index ${bad} is out of range for dim 0 of size 4`,
    );
  }
  throwsWith(
    () => x.indexSelect(1, tensor([2], { dtype: "int32", device: d })),
    "index 2 is out of range for dim 1 of size 2",
  );
  // Indices the device computed: at the next read on the device.
  const computed = tensor([1, 5], { dtype: "int32", device: d }).add(5); // [6, 10]
  const picked = x.indexSelect(0, computed);
  await assert.rejects(
    () => picked.data(),
    /indexSelect: index 10 is out of range for dim 0 of size 4/,
  );
  const negative = tensor([3], { dtype: "int32", device: d }).sub(10); // [-7]
  await assert.rejects(() => x.indexSelect(0, negative).data(), /index -7 is out of range/);
  // An index tensor changed in place is checked on the device again.
  const idx = tensor([1], { dtype: "int32", device: d });
  idx._assign(tensor([9], { dtype: "int32", device: d }).add(0));
  await assert.rejects(() => x.indexSelect(0, idx).data(), /index 9 is out of range/);
  // In range: values and gradient as before.
  const w = tensor([[1, 2], [3, 4], [5, 6], [7, 8]], { device: d, requiresGrad: true });
  const y = w.indexSelect(0, tensor([3, 0, 3], { dtype: "int32", device: d }));
  assertClose(await y.data(), [7, 8, 1, 2, 7, 8]);
  y.sum().backward();
  assertClose(await w.grad!.data(), [1, 1, 0, 0, 0, 0, 2, 2]);
});

backendTest("embedding: an index out of range is an error naming it", (d) => {
  const emb = new nn.Embedding(4, 2).to(d);
  throwsWith(
    () => emb.forward(tensor([[1, 4]], { dtype: "int32", device: d })),
    "index 4 is out of range",
    "size 4",
  );
});

// ---- int32: values it cannot hold, and the float -> int32 cast rule ----

backendTest("int32 tensors from values int32 cannot hold are errors, not wrapped numbers", (d) => {
  const int32 = { dtype: "int32" as const, device: d };
  throwsWith(() => tensor([3e9], int32), "tensor: 3000000000 cannot be stored as int32");
  throwsWith(
    () => tensor(new Float64Array([1, NaN]), int32),
    "tensor: NaN cannot be stored as int32",
  );
  throwsWith(() => full([2], NaN, int32), "full: NaN cannot be stored as int32");
  throwsWith(() => full([2], -Infinity, int32), "full: -Infinity cannot be stored as int32");
  throwsWith(() => full([2], 2 ** 31, int32), "full: 2147483648 cannot be stored as int32");
  throwsWith(() => tensor([1, 2], int32).add(3e9), "a number operand: 3000000000");
  throwsWith(() => arange(2e9, 3e9, 5e8, int32), "arange: 2500000000 cannot be stored as int32");
});

backendTest(
  "float -> int32 casts follow one rule: truncation, and -2^31 for NaN, ±inf, out of range",
  async (d) => {
    // The rule of FEATURES.md; PyTorch 1.13 on x86 gives these same numbers.
    const inputs = [
      NaN,
      Infinity,
      -Infinity,
      3e9,
      -3e9,
      2.7,
      -2.7,
      2147483520,
      -2147483648,
      2 ** 31,
    ];
    const want = [
      -(2 ** 31),
      -(2 ** 31),
      -(2 ** 31),
      -(2 ** 31),
      -(2 ** 31),
      2,
      -2,
      2147483520,
      -(2 ** 31),
      -(2 ** 31),
    ];
    // Ten elements, and eight (the vec4 kernel on webgpu).
    assert.deepEqual([...await tensor(inputs, { device: d }).to("int32").data()], want);
    assert.deepEqual(
      [...await tensor(inputs.slice(0, 8), { device: d }).to("int32").data()],
      want.slice(0, 8),
    );
    if (d.backend === "cpu") {
      const f64 = tensor(new Float64Array(inputs), { device: d }).to("int32");
      assert.deepEqual([...await f64.data()], want);
    }
  },
);

// ---- raw engine messages ----

Deno.test("manualSeed and arange say what is wrong in the library's words", () => {
  throwsWith(() => manualSeed(NaN), "manualSeed: the seed must be a finite number, got NaN");
  throwsWith(() => manualSeed(Infinity), "manualSeed", "Infinity");
  throwsWith(() => arange(0, Infinity), "arange: start, end and step must be finite numbers");
  throwsWith(() => arange(NaN), "arange", "NaN");
  throwsWith(
    () => arange(0, 1e12),
    "arange",
    "1000000000000 elements",
    "more than a host array holds",
  );
  manualSeed(1.9); // a finite number still seeds (truncated, as before)
});

// ---- sigmoid far below 0 ----

backendTest("sigmoid(-100) is 0 on every backend, as PyTorch's float32", async (d) => {
  const y = await tensor([-100, -89, -20, 0, 100], { device: d }).sigmoid().data();
  assertClose(y, [0, 0, 2.06115369216775e-9, 0.5, 1], { rtol: 1e-6, atol: 0 });
  assert.equal(y[0], 0);
  if (d.backend === "cpu") {
    // Above the overflow of e^-x, the subnormal results PyTorch gives on cpu.
    assert.equal((await tensor([-88.5], { device: d }).sigmoid().data())[0], 3.672301610145117e-39);
    const f64 = tensor(new Float64Array([-100]), { device: d }).sigmoid();
    assertClose(await f64.data(), [3.720075976020836e-44], { rtol: 1e-12, atol: 0 });
  }
});

// ---- tensor(nested arrays): shapes, element kinds and values ----

backendTest("tensor from nested arrays: ragged data and non-numbers name the place", async (d) => {
  throwsWith(
    () => tensor([[1, 2], [3]], { device: d }),
    "tensor: ragged nested array: data[0] has shape [2] but data[1] has shape [1]",
  );
  throwsWith(
    () => tensor([[[1], [2]], [[3], [4, 5]]], { device: d }),
    "data[1][0] has shape [1] but data[1][1] has shape [2]",
  );
  throwsWith(
    () => tensor([1, [2]], { device: d }),
    "data[0] has shape [] but data[1] has shape [1]",
  );
  throwsWith(
    () => tensor([[1], 2], { device: d }),
    "data[0] has shape [1] but data[1] has shape []",
  );
  throwsWith(
    () => tensor([1, "2"] as unknown as number[], { device: d }),
    "tensor: expected numbers or booleans, got string",
  );
  throwsWith(() => tensor([[1, 2]], { device: d, shape: [3] }), "shape [3] holds 3 elements");
  // Booleans are 1 and 0; fractions truncate toward zero into int32; float32 rounds.
  const t = tensor([[true, 2.75], [-2.75, false]], { dtype: "int32", device: d });
  assert.deepEqual([...t.shape], [2, 2]);
  assert.deepEqual([...await t.data()], [1, 2, -2, 0]);
  assert.deepEqual([...await tensor([[0.1]], { device: d }).data()], [Math.fround(0.1)]);
  assert.deepEqual([...tensor([[], []], { device: d }).shape], [2, 0]);
  assert.equal(await tensor(7, { device: d }).item(), 7);
});
