/**
 * Bad input gives clear errors that name the shapes, dims, dtypes and
 * devices involved; and a failing operation changes nothing: its inputs,
 * their gradients and the device's memory are as they were.
 * @module
 */

import assert from "node:assert/strict";
import {
  cat,
  chunk,
  device,
  full,
  Function,
  type FunctionCtx,
  linear,
  matmul,
  rand,
  randn,
  requestDevices,
  stack,
  type Tensor,
  tensor,
  tidy,
  zeros,
} from "../mod.ts";
import { BACKENDS, backendTest } from "./harness.ts";

const [CPU0, CPU1] = await requestDevices({ backend: "cpu", count: 2 });

/** Asserts `fn` throws an error whose message contains every part. */
function throwsWith(fn: () => unknown, ...parts: (string | RegExp)[]): Error {
  let caught: unknown;
  try {
    fn();
  } catch (error) {
    caught = error;
  }
  assert.ok(caught instanceof Error, `expected an error mentioning ${parts.join(", ")}`);
  for (const part of parts) {
    const ok = typeof part === "string" ? caught.message.includes(part) : part.test(caught.message);
    assert.ok(ok, `error message ${JSON.stringify(caught.message)} should mention ${part}`);
  }
  return caught;
}

/** As {@link throwsWith} for a promise-returning call, which must reject (not throw). */
async function rejectsWith(
  fn: () => Promise<unknown>,
  ...parts: (string | RegExp)[]
): Promise<void> {
  let promise: Promise<unknown>;
  try {
    promise = fn();
  } catch (error) {
    assert.fail(
      `expected a rejected promise, but the call threw synchronously: ${(error as Error).message}`,
    );
  }
  await assert.rejects(promise, (error: Error) => {
    for (const part of parts) {
      const ok = typeof part === "string" ? error.message.includes(part) : part.test(error.message);
      assert.ok(ok, `error message ${JSON.stringify(error.message)} should mention ${part}`);
    }
    return true;
  });
}

const m23 = () => tensor([[1, 2, 3], [4, 5, 6]]);

// ---- shapes ----

Deno.test("matmul shape mismatch names both shapes", () => {
  throwsWith(() => zeros([2, 3]).matmul(zeros([4, 5])), "matmul", "[2, 3]", "[4, 5]");
  throwsWith(() => matmul(zeros([3]), zeros([4])), "matmul", "[3]", "[4]");
  throwsWith(() => zeros([2, 2, 3]).matmul(zeros([3, 3, 2])), "matmul", "[2]", "[3]");
  throwsWith(() => zeros([]).matmul(zeros([3])), "matmul", "[]", "[3]");
  throwsWith(() => linear(zeros([2, 3]), zeros([4, 5])), "linear", "[2, 3]", "[4, 5]");
  throwsWith(
    () => linear(zeros([2, 3]), zeros([4, 3]), zeros([3])),
    "linear",
    "bias",
    "[3]",
    "[4]",
  );
});

Deno.test("broadcast mismatch names both shapes and the dim", () => {
  throwsWith(() => zeros([2, 3]).add(zeros([4])), "add", "[2, 3]", "[4]", "broadcast");
  throwsWith(() => zeros([3, 1, 5]).mul(zeros([4, 2])), "mul", "[3, 1, 5]", "[4, 2]");
  throwsWith(() => zeros([2, 3]).lt(zeros([2])), "lt", "[2, 3]", "[2]");
  throwsWith(() => zeros([2, 3]).div(zeros([3, 2])), "div", "[2, 3]", "[3, 2]");
  throwsWith(() => zeros([2, 3]).expand([4, 3]), "expand", "[2, 3]", "[4, 3]");
});

Deno.test("reshape to a wrong size names the shapes and element count", () => {
  throwsWith(() => m23().reshape([4, 2]), "reshape", "[4, 2]", "[2, 3]", "6");
  throwsWith(() => m23().view([5, -1]), "view", "[5, -1]", "[2, 3]");
  throwsWith(() => m23().reshape([-1, -1]), "reshape", "-1");
  throwsWith(() => zeros([2, 3]).flatten().reshape([7]), "reshape", "[7]", "[6]");
});

Deno.test("other shape errors: cat, stack, split, chunk, narrow, permute, factories", () => {
  throwsWith(() => cat([zeros([2, 3]), zeros([2, 4])], 0), "cat", "[2, 4]", "[2, 3]");
  throwsWith(() => cat([]), "cat");
  throwsWith(() => stack([zeros([2]), zeros([3])]), "stack", "[3]", "[2]");
  throwsWith(() => zeros([5]).split([2, 2]), "split", "[2,2]", "5");
  throwsWith(() => chunk(zeros([5]), 0), "chunk", "0");
  throwsWith(() => zeros([4, 3]).narrow(0, 3, 2), "narrow", "start 3", "length 2", "size 4");
  throwsWith(() => zeros([2, 3]).permute([0]), "permute", "[2, 3]");
  throwsWith(() => zeros([2, 3]).permute([0, 0]), "permute", "[0,0]");
  throwsWith(() => zeros([2, -1]), "shape", "[2,-1]");
  throwsWith(() => zeros([1.5]), "shape", "1.5");
  throwsWith(() => tensor([1, 2, 3], { shape: [2, 2] }), "tensor", "[2, 2]", "3");
  throwsWith(() => tensor([1, 2], { shape: [-1, -2] }), "shape", "[-1,-2]");
  throwsWith(() => tensor(Float32Array.of(1, 2), { shape: [2, 2] }), "tensor", "[2, 2]", "2");
  throwsWith(() => zeros([2, 2, 2]).t(), "t", "[2, 2, 2]");
});

Deno.test("dims out of range name the dim and the tensor's rank", () => {
  const x = zeros([2, 3]);
  throwsWith(() => x.sum(2), "sum", "dim 2", "2-dimensional");
  throwsWith(() => x.mean(-3), "mean", "dim -3");
  throwsWith(() => x.sum([0, 0]), "sum", "repeats");
  throwsWith(() => x.max(2), "max", "dim 2");
  throwsWith(() => x.argmin(5), "argmin", "dim 5");
  throwsWith(() => x.transpose(0, 3), "transpose", "dim 3");
  throwsWith(() => x.softmax(2), "softmax", "dim 2");
  throwsWith(() => x.logSoftmax(-3), "logSoftmax", "dim -3");
  throwsWith(() => x.unsqueeze(4), "unsqueeze", "dim 4");
  throwsWith(() => x.squeeze(2), "squeeze", "dim 2");
  throwsWith(() => x.narrow(2, 0, 1), "narrow", "dim 2");
  throwsWith(() => x.chunk(2, 2), "chunk", "dim 2");
  throwsWith(() => x.split(1, -3), "split", "dim -3");
  throwsWith(() => cat([x, x], 2), "cat", "dim 2");
  throwsWith(() => stack([x, x], 4), "stack", "dim 4");
  throwsWith(() => x.indexSelect(2, tensor([0], { dtype: "int32" })), "indexSelect", "dim 2");
  throwsWith(() => x.size(2), "size", "dim 2");
  throwsWith(() => x.permute([0, 2]), "permute", "dim 2");
  throwsWith(() => x.flatten(0, 5), "flatten", "dim 5");
  throwsWith(() => x.sum(0.5), "sum", "dim 0.5");
  // A 0-d tensor takes dim 0 or -1 only.
  const s = tensor(3);
  throwsWith(() => s.sum(5), "sum", "dim 5", "0-dimensional");
  throwsWith(() => s.mean(1), "mean", "dim 1");
  throwsWith(() => s.squeeze(2), "squeeze", "dim 2");
  throwsWith(() => s.max(1), "max", "dim 1");
  throwsWith(() => zeros([3]).transpose(4, 4), "transpose", "dim 4");
  for (
    const ok of [
      s.sum(0),
      s.sum(-1),
      s.mean(0),
      s.squeeze(0),
      s.max(-1),
      zeros([3]).transpose(0, -1),
    ]
  ) {
    assert.ok(ok.ndim <= 1);
  }
});

Deno.test("reductions of an empty dim (other than sum) are errors naming the shape", () => {
  throwsWith(() => zeros([0, 3]).max(0), "max", "[0, 3]");
  throwsWith(() => zeros([0]).argmax(), "argmax", "[0]");
  throwsWith(() => zeros([2, 0]).min(1), "min", "[2, 0]");
});

// ---- dtypes ----

Deno.test("float ops on int32 name the op and the dtype", () => {
  const i = tensor([1, 2, 3], { dtype: "int32" });
  throwsWith(() => i.exp(), "exp", "int32");
  throwsWith(() => i.log(), "log", "int32");
  throwsWith(() => i.sigmoid(), "sigmoid", "int32");
  throwsWith(() => i.reshape([1, 3]).matmul(tensor([[1], [2], [3]])), "matmul", "int32");
  throwsWith(() => i.softmax(0), "softmax", "int32");
  throwsWith(() => i.logSoftmax(0), "logSoftmax", "int32");
  throwsWith(() => i.mean(), "mean", "int32");
  throwsWith(() => i.pow(2), "pow", "int32");
  throwsWith(
    () => {
      i.requiresGrad = true;
    },
    "requiresGrad",
    "int32",
  );
  throwsWith(() => tensor([1, 2], { dtype: "int32", requiresGrad: true }), "requiresGrad", "int32");
  throwsWith(() => zeros([2], { dtype: "int32", requiresGrad: true }), "requiresGrad", "int32");
  throwsWith(() => tensor([2147483648], { dtype: "int32" }), "tensor", "int32", "overflow");
  throwsWith(
    () => linear(zeros([2, 3]), zeros([4, 3], { dtype: "float64" })),
    "linear",
    "float32",
    "float64",
  );
  throwsWith(() => linear(zeros([2, 3]), zeros([4, 3], { dtype: "int32" })), "linear", "int32");
  throwsWith(() => rand([2], { dtype: "int32" }), "rand", "int32");
  throwsWith(() => randn([2], { dtype: "int32" }), "randn", "int32");
  throwsWith(() => zeros([2]).indexSelect(0, tensor([0, 1])), "indexSelect", "int32", "float32");
  throwsWith(
    () => matmul(zeros([2, 2]), zeros([2, 2], { dtype: "float64" })),
    "matmul",
    "float32",
    "float64",
  );
});

Deno.test("unknown dtype names it and the known ones", () => {
  const bad = "float16" as unknown as "float32";
  throwsWith(() => zeros([2], { dtype: bad }), "float16", "float32", "int32");
  throwsWith(() => tensor([1], { dtype: bad }), "float16", "float32");
  throwsWith(() => zeros([2]).to(bad), "float16", "float32");
  throwsWith(
    () => zeros([2], { dtype: "int32" }).to("bfloat16" as unknown as "float32"),
    "bfloat16",
    "dtype",
  );
});

Deno.test({
  name: "float64 on a backend without it names the dtype and the device",
  ignore: !BACKENDS.has("webgpu"),
  fn() {
    const gpu = BACKENDS.get("webgpu")![0];
    throwsWith(
      () => zeros([2], { dtype: "float64", device: gpu }),
      "float64",
      "webgpu:0",
      "float32",
    );
    throwsWith(() => zeros([2], { dtype: "float64" }).to(gpu), "float64", "webgpu:0");
    throwsWith(() => zeros([2], { device: gpu }).to("float64"), "float64", "webgpu:0");
  },
});

// ---- devices ----

Deno.test("mixing devices in one op names both devices", () => {
  const a = zeros([2, 3], { device: CPU0 });
  const b = zeros([2, 3], { device: CPU1 });
  throwsWith(() => a.add(b), "add", "cpu:0", "cpu:1", "[2, 3]");
  throwsWith(() => a.mul(b), "mul", "cpu:0", "cpu:1");
  throwsWith(() => a.div(b), "div", "cpu:0", "cpu:1");
  throwsWith(() => a.maximum(b), "maximum", "cpu:0", "cpu:1");
  throwsWith(() => a.matmul(b.t()), "matmul", "cpu:0", "cpu:1");
  throwsWith(() => linear(a, b), "linear", "cpu:0", "cpu:1");
  throwsWith(() => cat([a, b]), "cat", "cpu:0", "cpu:1");
  throwsWith(() => stack([a, b]), "cat", "cpu:0", "cpu:1");
  throwsWith(
    () => a.indexSelect(0, tensor([0], { dtype: "int32", device: CPU1 })),
    "indexSelect",
    "cpu:0",
    "cpu:1",
  );
  throwsWith(() => a.eq(b), "eq", "cpu:0", "cpu:1");
  const int = zeros([2, 3], { dtype: "int32", device: CPU1 });
  throwsWith(() => a.add(int), "add", "cpu:0", "cpu:1");
});

Deno.test("unknown device names are errors naming the registered backends", () => {
  throwsWith(() => device("tpu:0"), "tpu", "cpu");
  throwsWith(() => zeros([2], { device: "tpu" }), "tpu");
  throwsWith(() => zeros([2]).to("tpu:1"), "tpu");
  throwsWith(() => device("cpu:x"), "cpu:x");
  throwsWith(() => device("CPU"), "CPU");
});

Deno.test("a device that is not started names requestDevices", () => {
  throwsWith(() => device("webgpu:5"), "webgpu:5", "requestDevices", "count: 6");
  throwsWith(() => zeros([2], { device: "webgpu:5" }), "webgpu:5", "requestDevices");
});

Deno.test("requestDevices: bad count and unknown backend", async () => {
  await rejectsWith(() => requestDevices({ backend: "cpu", count: 0 }), "count", "0");
  await rejectsWith(() => requestDevices({ backend: "nope" }), "nope", "cpu");
});

// ---- autograd ----

Deno.test("backward on a non-scalar without grad names the shape", () => {
  const x = tensor([1, 2, 3], { requiresGrad: true });
  throwsWith(() => x.mul(2).backward(), "backward", "[3]", "scalar");
  throwsWith(() => x.mul(2).backward(zeros([2])), "backward", "[2]", "[3]");
  throwsWith(() => x.mul(2).backward(zeros([3], { device: CPU1 })), "backward", "cpu:1", "cpu:0");
  throwsWith(() => tensor([1, 2]).sum().backward(), "backward", "require");
});

Deno.test("backward twice without retainGraph says to retain the graph", async () => {
  const x = tensor([1, 2, 3], { requiresGrad: true });
  const loss = x.mul(x).sum();
  loss.backward();
  const before = await x.grad!.data();
  throwsWith(() => loss.backward(), "retainGraph");
  assert.deepEqual(await x.grad!.data(), before, "the grad is unchanged");
  // Through an intermediate node too, not only the root.
  const y = tensor([1, 2], { requiresGrad: true });
  const h = y.exp();
  h.sum().backward();
  throwsWith(() => h.mul(2).sum().backward(), "exp", "retainGraph");
});

Deno.test("Function errors: bad outputs, wrong gradient count or shape", () => {
  class NotATensor extends Function {
    static override forward(_ctx: FunctionCtx, _x: Tensor): Tensor {
      return 3 as unknown as Tensor;
    }
  }
  throwsWith(() => NotATensor.apply(tensor([1], { requiresGrad: true })), "NotATensor", "Tensor");
  class WrongShape extends Function {
    static override forward(_ctx: FunctionCtx, x: Tensor): Tensor {
      return x.mul(2);
    }
    static override backward(_ctx: FunctionCtx, g: Tensor): Tensor {
      return g.sum();
    }
  }
  const x = tensor([1, 2], { requiresGrad: true });
  throwsWith(() => WrongShape.apply(x).sum().backward(), "WrongShape", "[]", "[2]");
  const y = tensor([1, 2], { requiresGrad: true });
  y.requiresGrad = true;
  throwsWith(
    () => {
      y.mul(2).requiresGrad = false;
    },
    "requiresGrad",
    "detach",
  );
  throwsWith(
    () => {
      y.grad = zeros([3]);
    },
    "grad",
    "[3]",
    "[2]",
  );
});

// ---- construction and reading ----

Deno.test("ragged nested arrays name the mismatching entries and shapes", () => {
  throwsWith(() => tensor([[1, 2], [3]]), "ragged", "data[1]", "[1]", "[2]");
  throwsWith(() => tensor([[[1], [2]], [[3], [4, 5]]]), "ragged", "data[1][1]");
  throwsWith(() => tensor([1, [2]]), "ragged");
  throwsWith(() => tensor([1, "a" as unknown as number]), "tensor", "string");
});

Deno.test("item() on many elements names the count and shape", async () => {
  await rejectsWith(() => zeros([2, 3]).item(), "item", "6", "[2, 3]");
  await rejectsWith(() => zeros([0]).item(), "item", "0");
});

Deno.test("reading a disposed tensor rejects; using it in an op throws", async () => {
  const x = tensor([1, 2, 3]);
  const view = x.reshape([3, 1]);
  x.dispose();
  await rejectsWith(() => x.data(), "released");
  await rejectsWith(() => x.toArray(), "released");
  const one = tensor([5]);
  one.dispose();
  await rejectsWith(() => one.item(), "released");
  await rejectsWith(() => view.data(), "released");
  throwsWith(() => x.add(1), "add", "released");
  throwsWith(() => x.exp(), "exp", "released");
  throwsWith(() => x.sum(), "sum", "released");
  throwsWith(() => x.to(CPU1), "released");
  x.dispose(); // twice is fine
});

Deno.test("arange, registerBackend, tidy and operand errors", async () => {
  const { add, arange, registerBackend } = await import("../mod.ts");
  throwsWith(() => arange(0, 5, 0), "arange", "step");
  throwsWith(
    () => registerBackend("Bad Name", () => ({ createDevice: () => CPU0.backendDevice })),
    "Bad Name",
  );
  throwsWith(() => tensor([1]).add("2" as unknown as number), "add", "string");
  throwsWith(() => add("2" as unknown as number, tensor([1])), "add", "string");
  throwsWith(() => add(2, 3), "add", "at least one Tensor", "2", "3");
  throwsWith(() => tidy(async () => {}), "tidy", "Promise");
});

// ---- nothing half-updated ----

interface Snapshot {
  values: number[];
  grad: number[] | null;
  shape: number[];
  dtype: string;
  requiresGrad: boolean;
  isLeaf: boolean;
}

async function snapshot(t: Tensor): Promise<Snapshot> {
  return {
    values: Array.from(await t.data()),
    grad: t.grad ? Array.from(await t.grad.data()) : null,
    shape: [...t.shape],
    dtype: t.dtype,
    requiresGrad: t.requiresGrad,
    isLeaf: t.isLeaf,
  };
}

backendTest(
  "a failing op leaves its inputs, their grads and device memory untouched",
  async (d) => {
    const a = tensor([[1, 2, 3], [4, 5, 6]], { device: d, requiresGrad: true });
    const b = tensor([0.5, -1, 2, 3], { device: d, requiresGrad: true });
    const n = tensor([1, 2, 3, 4], { device: d, dtype: "int32" });
    // Give both leaves a gradient first.
    a.mul(a).sum().add(b.exp().sum()).backward();
    const before = [await snapshot(a), await snapshot(b), await snapshot(n)];
    const a2 = a.mul(2);
    const emptyA = a.narrow(0, 0, 0);
    const emptyB = b.narrow(0, 0, 0);
    const failing: [string, () => unknown][] = [
      ["add broadcast", () => a.add(b)],
      ["add int32 + float32 broadcast", () => n.add(a)],
      ["div int32 by float32 broadcast", () => n.div(a)],
      ["pow broadcast", () => a.pow(n)],
      ["matmul", () => a.matmul(b)],
      ["reshape", () => a.reshape([4, 2])],
      ["cat", () => cat([a, b])],
      ["cat promoting", () => cat([a, n], 1)],
      ["stack", () => stack([b, a.flatten()])],
      ["expand", () => a.expand([3, 3])],
      ["narrow", () => b.narrow(0, 2, 5)],
      ["sum dim", () => a.sum(3)],
      ["max of an empty dim", () => emptyA.max(0)],
      ["argmax of an empty tensor", () => emptyB.argmax()],
      ["softmax int32", () => n.softmax(0)],
      ["indexSelect float indices", () => a.indexSelect(0, b)],
      ["backward non-scalar", () => a2.backward()],
      ["backward wrong grad shape", () => a2.backward(b)],
      [
        "int32 factory with requiresGrad",
        () => tensor([1, 2], { device: d, dtype: "int32", requiresGrad: true }),
      ],
      [
        "full int32 with requiresGrad",
        () => full([3], 1, { device: d, dtype: "int32", requiresGrad: true }),
      ],
      ["tensor with a bad shape", () => tensor([1, 2], { device: d, shape: [3] })],
    ];
    for (const [name, op] of failing) {
      const bytes = d.memory().bytesInUse;
      assert.throws(op, Error, `${name} should fail`);
      assert.equal(d.memory().bytesInUse, bytes, `${name}: device memory in use changed`);
    }
    assert.deepEqual([await snapshot(a), await snapshot(b), await snapshot(n)], before);
  },
);

class BadBackward extends Function {
  static override forward(_ctx: FunctionCtx, x: Tensor): Tensor {
    return x.mul(3);
  }
  static override backward(_ctx: FunctionCtx, g: Tensor): Tensor {
    return g.sum(0);
  }
}

backendTest(
  "a failing backward leaves every leaf's grad untouched and frees its intermediates",
  async (d) => {
    const a = tensor([1, 2, 3], { device: d, requiresGrad: true });
    const b = tensor([[1, 2], [3, 4]], { device: d, requiresGrad: true });
    a.mul(2).sum().add(b.sum()).backward();
    const before = [await snapshot(a), await snapshot(b)];
    // The graph reaches `a` through several ops before the bad node fails.
    const loss = a.exp().mul(a).sum().add(BadBackward.apply(b).exp().sum());
    const bytes = d.memory().bytesInUse;
    throwsWith(() => loss.backward(), "BadBackward", "[2]", "[2, 2]");
    assert.equal(d.memory().bytesInUse, bytes, "intermediate gradients were released");
    assert.deepEqual([await snapshot(a), await snapshot(b)], before);
  },
);

Deno.test("a failing tidy releases what it made and rethrows", () => {
  const bytes = CPU0.memory().bytesInUse;
  const kept = zeros([4]);
  const after = CPU0.memory().bytesInUse;
  assert.throws(() =>
    tidy(() => {
      const t = kept.add(kept).mul(kept);
      t.exp();
      throw new Error("boom");
    }), /boom/);
  assert.equal(CPU0.memory().bytesInUse, after);
  assert.ok(after > bytes);
  assert.deepEqual(Array.from(kept.shape), [4]);
});

Deno.test({
  name: "a device on a backend that failed to start names the reason",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const { registerBackend, unregisterBackend } = await import("../mod.ts");
    registerBackend("broken", () => Promise.reject(new Error("no adapter here")), { priority: -5 });
    try {
      await rejectsWith(() => requestDevices({ backend: "broken" }), "broken", "no adapter here");
      throwsWith(() => device("broken:0"), "broken", "no adapter here");
    } finally {
      unregisterBackend("broken");
    }
  },
});

Deno.test({
  name: "a backend that device() started first fails with the same message as requestDevices",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const { registerBackend, unregisterBackend } = await import("../mod.ts");
    registerBackend("broken-async", () => Promise.reject(new Error("no adapter")), {
      priority: -5,
    });
    registerBackend("broken-sync", () => {
      throw new Error("no driver");
    }, { priority: -5 });
    try {
      // device() starts the factory without waiting for it.
      throwsWith(() => device("broken-async:0"), "requestDevices");
      await rejectsWith(
        () => requestDevices({ backend: "broken-async" }),
        'backend "broken-async" cannot start',
        "no adapter",
      );
      throwsWith(() => device("broken-sync:0"), "broken-sync", "no driver");
      await rejectsWith(
        () => requestDevices({ backend: "broken-sync" }),
        'backend "broken-sync" cannot start',
        "no driver",
      );
    } finally {
      unregisterBackend("broken-async");
      unregisterBackend("broken-sync");
    }
  },
});
