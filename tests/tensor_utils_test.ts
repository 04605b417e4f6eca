/**
 * The Tensor conveniences and torch-level utilities (wave s14b, area H):
 * unfold, asStrided, splitWithSizes, narrowCopy, frexp, sumToSize,
 * hardshrink/prelu and the torch.* linear algebra as methods, histc and
 * bincount as methods, the new* factories, type/stride/elementSize and the
 * other queries, and isTensor/numel/seed/initialSeed/setGradEnabled/
 * inferenceMode/useDeterministicAlgorithms, against PyTorch 1.13
 * (tests/fixtures/torch_tensor_utils.json) on every backend; float64
 * gradient checks on cpu; errors naming the bad shapes and values.
 * @module
 */

import assert from "node:assert/strict";
import * as mg from "../mod.ts";
import { type Device, type DType, type Tensor, tensor } from "../mod.ts";
import { assertClose, backendTest, decodeFixture, type FixtureValues } from "./harness.ts";
import { check, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_tensor_utils.json" with { type: "json" };

interface FixtureTensor {
  values: FixtureValues;
  dtype: string;
  shape: number[];
}

interface Case {
  name: string;
  fn: string;
  inputs: FixtureTensor[];
  args: unknown[];
  outputs: FixtureTensor[];
  g?: (FixtureValues | null)[];
  grads?: (FixtureValues | null)[];
}

type Run = (xs: Tensor[], args: unknown[], method: boolean) => Tensor | Tensor[];

const n = (v: unknown) => v as number;
const ns = (v: unknown) => v as number[];

/** Each fixture `fn` as multigrad's Tensor method, or (without `method`) the torch-level function. */
const RUN: Record<string, Run> = {
  unfold: ([x], a) => x.unfold(n(a[0]), n(a[1]), n(a[2])),
  asStrided: ([x], a, m) =>
    m ? x.asStrided(ns(a[0]), ns(a[1]), n(a[2])) : mg.asStrided(x, ns(a[0]), ns(a[1]), n(a[2])),
  splitWithSizes: ([x], a, m) =>
    m ? x.splitWithSizes(ns(a[0]), n(a[1])) : mg.splitWithSizes(x, ns(a[0]), n(a[1])),
  narrowCopy: ([x], a, m) =>
    m ? x.narrowCopy(n(a[0]), n(a[1]), n(a[2])) : mg.narrowCopy(x, n(a[0]), n(a[1]), n(a[2])),
  frexp: ([x], _, m) => (m ? x.frexp() : mg.frexp(x)),
  sumToSize: ([x], a) => x.sumToSize(ns(a[0])),
  hardshrink: ([x], a) => (a.length ? x.hardshrink(n(a[0])) : x.hardshrink()),
  prelu: ([x, w], _, m) => (m ? x.prelu(w) : mg.prelu(x, w)),
  det: ([x], _, m) => (m ? x.det() : mg.det(x)),
  slogdet: ([x], _, m) => (m ? x.slogdet() : mg.slogdet(x)),
  matrixPower: ([x], a, m) => (m ? x.matrixPower(n(a[0])) : mg.matrixPower(x, n(a[0]))),
  cross: ([x, y], a, m) =>
    m ? x.cross(y, a[0] as number | undefined) : mg.cross(x, y, a[0] as number | undefined),
  cholesky: ([x], a, m) => m ? x.cholesky(a[0] as boolean) : mg.cholesky(x, a[0] as boolean),
  qr: ([x], a, m) => (m ? x.qr(a[0] as boolean) : mg.qr(x, a[0] as boolean)),
  orgqr: ([x, tau]) => x.orgqr(tau),
  igamma: ([a, x], _, m) => (m ? a.igamma(x) : mg.igamma(a, x)),
  igammac: ([a, x], _, m) => (m ? a.igammac(x) : mg.igammac(a, x)),
  histc: ([x], a) => x.histc(a[0] as mg.HistcOptions),
  bincount: ([x], a) => x.bincount(a[0] as mg.BincountOptions),
};

function input(t: FixtureTensor, device: Device, requiresGrad: boolean): Tensor {
  return tensor(decodeFixture(t.values), {
    shape: t.shape,
    dtype: t.dtype as DType,
    device,
    requiresGrad: requiresGrad && t.dtype !== "int32",
  });
}

const CASES = fixtures.cases as unknown as Case[];
const LINALG = new Set(["det", "slogdet", "matrixPower", "cholesky", "qr", "orgqr"]);
/** The fixture fns that are torch.* functions too (the others are methods only). */
const FUNCTIONS = new Set([
  ...LINALG,
  "cross",
  "asStrided",
  "splitWithSizes",
  "narrowCopy",
  "frexp",
  "prelu",
  "igamma",
  "igammac",
]);

for (const c of CASES) {
  backendTest(`tensor utils fixture: ${c.name}`, async (device) => {
    if (c.inputs.some((t) => t.dtype === "float64") && device.backend !== "cpu") return;
    // float32 elimination / factorization orders differ from LAPACK's in the last bits.
    const tol = LINALG.has(c.fn) ? { atol: 2e-4, rtol: 2e-4 } : { atol: 1e-5, rtol: 1e-5 };
    for (const method of FUNCTIONS.has(c.fn) ? [true, false] : [true]) {
      const xs = c.inputs.map((t) => input(t, device, c.grads !== undefined));
      const outs = [RUN[c.fn](xs, c.args, method)].flat();
      assert.equal(outs.length, c.outputs.length, `${c.name}: number of outputs`);
      for (let i = 0; i < outs.length; i++) {
        const what = `${c.name} (${method ? "method" : "function"}) output ${i} on ${device}`;
        assert.deepEqual([...outs[i].shape], c.outputs[i].shape, `${what}: shape`);
        assert.equal(outs[i].dtype, c.outputs[i].dtype, `${what}: dtype`);
        assertClose(await outs[i].data(), decodeFixture(c.outputs[i].values), { ...tol, what });
      }
      if (!c.g || !c.grads) continue;
      let loss: Tensor | null = null;
      outs.forEach((o, i) => {
        // Outputs multigrad records no graph for (slogdet's sign, a 0th power) give 0 gradients.
        if (c.g![i] === null || !o.requiresGrad) return;
        const term = o.mul(tensor(decodeFixture(c.g![i]), { shape: [...o.shape], device })).sum();
        loss = loss ? loss.add(term) : term;
      });
      if (loss === null) {
        for (const g of c.grads) assert.ok(g === null || decodeFixture(g).every((v) => v === 0));
        continue;
      }
      (loss as Tensor).backward();
      const leaves = xs.filter((x) => x.requiresGrad);
      for (let i = 0; i < leaves.length; i++) {
        const what = `${c.name} grad ${i} on ${device}`;
        assertClose(await leaves[i].grad!.data(), decodeFixture(c.grads[i]!), { ...tol, what });
      }
    }
  });
}

// ---- queries ----

const Q = fixtures.queries;

backendTest("tensor utils: type names, strides, element sizes, devices", async (device) => {
  const dtypes: DType[] = device.backend === "cpu" ? ["float32", "float64", "int32"] : [
    "float32",
    "int32",
  ];
  for (const dtype of dtypes) {
    const x = mg.zeros([2, 3, 4], { dtype, device });
    assert.equal(x.type(), Q.type[dtype]);
    assert.equal(x.elementSize(), Q.element_size[dtype]);
    assert.equal(x.isFloatingPoint(), dtype !== "int32");
    assert.equal(mg.isFloatingPoint(x), dtype !== "int32");
    assert.equal(x.isSigned(), true);
  }
  const x = mg.zeros(Q.stride.shape, { device });
  assert.deepEqual(x.stride(), Q.stride.stride);
  assert.equal(x.stride(-1), Q.stride.stride_minus1);
  assert.equal(mg.zeros([], { device }).stride().length, 0);
  assert.equal(x.isContiguous(), true);
  assert.equal(x.contiguous(), x);
  assert.equal(x.dim(), 3);
  assert.equal(x.nelement(), 24);
  assert.equal(x.getDevice(), device.backend === "cpu" ? Q.get_device_cpu : device.index);
  assert.equal(x.isSameSize(mg.ones([2, 3, 4], { device })), true);
  assert.equal(mg.isSameSize(x, mg.ones([2, 4, 3], { device })), false);
  // Conversions.
  const v = tensor([1.7, -2.5], { device });
  assert.equal(v.int().dtype, "int32");
  assert.deepEqual(await v.long().toArray(), [1, -2]);
  assert.equal(v.int().float().dtype, "float32");
  assert.equal(v.type("torch.IntTensor").dtype, "int32");
  assert.equal(v.type("torch.LongTensor").dtype, "int32");
  assert.equal((v.type("float32") as Tensor).dtype, "float32");
  if (device.backend === "cpu") {
    assert.equal(v.double().dtype, "float64");
    assert.equal(v.type("torch.DoubleTensor").dtype, "float64");
  }
  const c = v.cpu();
  assert.equal(c.device.toString(), "cpu:0");
  assert.deepEqual(await c.toArray(), await v.toArray());
  assert.deepEqual(await mg.tensor([[1, 2], [3, 4]], { device }).tolist(), [[1, 2], [3, 4]]);
});

backendTest("tensor utils: new* factories take this dtype and device", async (device) => {
  const f = mg.zeros([1], { device });
  const i = mg.zeros([1], { dtype: "int32", device });
  const z = f.newZeros([2, 3]);
  assert.deepEqual([z.shape, z.dtype, z.device], [[2, 3], "float32", device]);
  assert.deepEqual(await f.newOnes([2]).toArray(), [1, 1]);
  assert.deepEqual(await i.newFull([3], 3.5).toArray(), Q.new_full_int);
  assert.equal(i.newFull([3], 3.5).dtype, "int32");
  assert.deepEqual(await f.newEmpty([0, 2]).toArray(), []);
  assert.equal(f.newOnes([2], { dtype: "int32" }).dtype, "int32");
  const t = i.newTensor([[1, 2], [3, 4]]);
  assert.deepEqual([t.shape, t.dtype, t.device], [[2, 2], "int32", device]);
  const r = f.newZeros([2], { requiresGrad: true });
  assert.equal(r.requiresGrad, true);
  // A tensor's data is copied without its history.
  const src = tensor([1, 2], { device, requiresGrad: true }).mul(2);
  const copy = f.newTensor(src);
  assert.equal(copy.requiresGrad, false);
  assert.deepEqual(await copy.toArray(), [2, 4]);
  assert.throws(() => f.newZeros([2, -1]), /newZeros: size must be .*\[2,-1\]/);
  assert.throws(() => f.newFull([2], "3" as unknown as number), /fillValue must be a number/);
});

backendTest("tensor utils: isNonzero as PyTorch (async)", async (device) => {
  for (const { value, result } of Q.is_nonzero) {
    assert.equal(await tensor([Number(value)], { device }).isNonzero(), result, `${value}`);
  }
  assert.equal(await mg.isNonzero(tensor(3, { device })), true);
  await assert.rejects(
    tensor([1, 2], { device }).isNonzero(),
    /more than one value is ambiguous \(shape \[2\]\)/,
  );
  await assert.rejects(mg.zeros([0], { device }).isNonzero(), /no values is ambiguous/);
});

backendTest("tensor utils: matrix transposes and the real-number no-ops", async (device) => {
  const x = mg.arange(24, { device }).float().reshape([2, 3, 4]);
  const swapped = await x.transpose(1, 2).toArray();
  for (const t of [x.mT, x.mH, x.adjoint()]) {
    assert.deepEqual(t.shape, [2, 4, 3]);
    assert.deepEqual(await t.toArray(), swapped);
  }
  assert.deepEqual(await x.T.toArray(), await x.permute([2, 1, 0]).toArray());
  const m = x.select(0, 1);
  assert.deepEqual(await m.H.toArray(), await m.t().toArray());
  assert.deepEqual(await m.T.toArray(), await m.t().toArray());
  const v = tensor([1, 2, 3], { device });
  assert.equal(v.T, v);
  assert.throws(
    () => v.mT,
    /mT is only supported on matrices or batches of matrices, got a 1-D tensor \(shape \[3\]\)/,
  );
  assert.throws(() => v.adjoint(), /adjoint\(\) is only supported on matrices/);
  assert.throws(() => x.H, /H is only supported on matrices \(2-D tensors\), got a 3-D tensor/);
  // Gradients flow through the transposes.
  const w = mg.ones([2, 3], { device, requiresGrad: true });
  w.mT.mul(tensor([[1, 2], [3, 4], [5, 6]], { device })).sum().backward();
  assert.deepEqual(await w.grad!.toArray(), [[1, 3, 5], [2, 4, 6]]);
  assert.equal(x.ndimension(), 3);
  assert.equal(x.storageOffset(), 0);
  assert.equal(x.isComplex(), false);
  assert.equal(x.isConj(), false);
  assert.equal(x.isNeg(), false);
  assert.equal(x.isInference(), false);
  assert.equal(x.conj(), x);
  assert.equal(x.resolveConj(), x);
  assert.equal(x.resolveNeg(), x);
});

// ---- torch-level utilities ----

Deno.test("torch utils: isTensor, numel, seeds", () => {
  const x = mg.zeros([2, 5]);
  assert.equal(mg.isTensor(x), true);
  assert.equal(mg.isTensor([1, 2]), false);
  assert.equal(mg.numel(x), 10);
  assert.throws(() => mg.numel([1] as unknown as Tensor), /numel: the input must be a Tensor/);
  mg.manualSeed(123);
  assert.equal(mg.initialSeed(), Q.initial_seed["123"]);
  mg.manualSeed(-1);
  assert.equal(mg.initialSeed(), Q.initial_seed["-1"]);
  const s = mg.seed();
  assert.ok(Number.isSafeInteger(s) && s >= 0, `seed() gave ${s}`);
  assert.equal(mg.initialSeed(), s);
  const a = mg.rand([4]);
  mg.manualSeed(s);
  const b = mg.rand([4]);
  return Promise.all([a.data(), b.data()]).then(([u, v]) => assert.deepEqual(u, v));
});

Deno.test("torch utils: setGradEnabled and inferenceMode", () => {
  const w = tensor([1, 2], { requiresGrad: true });
  assert.equal(mg.setGradEnabled(false), true);
  try {
    assert.equal(mg.isGradEnabled(), false);
    assert.equal(w.mul(2).requiresGrad, false);
  } finally {
    assert.equal(mg.setGradEnabled(true), false);
  }
  assert.equal(w.mul(2).requiresGrad, true);
  assert.throws(() => mg.setGradEnabled(1 as unknown as boolean), /mode must be a boolean/);
  assert.equal(mg.isInferenceModeEnabled(), false);
  const out = mg.inferenceMode(() => {
    assert.equal(mg.isInferenceModeEnabled(), true);
    // enableGrad inside turns recording back on, so the mode no longer holds.
    mg.enableGrad(() => assert.equal(mg.isInferenceModeEnabled(), false));
    return w.mul(3);
  });
  assert.equal(out.requiresGrad, false);
  assert.equal(mg.isInferenceModeEnabled(), false);
  assert.equal(mg.isGradEnabled(), true);
  assert.throws(() => mg.inferenceMode(5 as unknown as () => void), /expected a function/);
});

Deno.test("torch utils: inferenceMode nests and restores the grad mode on throw", () => {
  const modes = () => [mg.isGradEnabled(), mg.isInferenceModeEnabled()];
  mg.inferenceMode(() => {
    mg.inferenceMode(() => assert.deepEqual(modes(), [false, true]));
    assert.deepEqual(modes(), [false, true]);
  });
  assert.throws(() =>
    mg.inferenceMode(() =>
      mg.inferenceMode(() => {
        throw new Error("boom");
      })
    ), /boom/);
  assert.deepEqual(modes(), [true, false]);
  // Inside noGrad, leaving inferenceMode keeps noGrad's mode.
  mg.noGrad(() => {
    mg.inferenceMode(() => assert.deepEqual(modes(), [false, true]));
    assert.deepEqual(modes(), [false, false]);
  });
  assert.deepEqual(modes(), [true, false]);
  // An async fn is refused by the name the caller used, and leaves no mode behind.
  assert.throws(
    () => mg.inferenceMode(() => Promise.resolve(1)),
    /^TypeError: inferenceMode\(fn\): fn returned a Promise/,
  );
  assert.deepEqual(modes(), [true, false]);
});

Deno.test("torch utils: useDeterministicAlgorithms records its flag", () => {
  assert.equal(mg.areDeterministicAlgorithmsEnabled(), false);
  mg.useDeterministicAlgorithms(true);
  assert.equal(mg.areDeterministicAlgorithmsEnabled(), true);
  assert.equal(mg.isDeterministicAlgorithmsWarnOnlyEnabled(), false);
  mg.useDeterministicAlgorithms(false, { warnOnly: true });
  assert.equal(mg.areDeterministicAlgorithmsEnabled(), false);
  // As PyTorch: warn_only is kept even with the flag off.
  assert.equal(mg.isDeterministicAlgorithmsWarnOnlyEnabled(), true);
  mg.useDeterministicAlgorithms(false);
  assert.throws(
    () => mg.useDeterministicAlgorithms("yes" as unknown as boolean),
    /mode must be a boolean, got string/,
  );
});

// ---- errors ----

backendTest("tensor utils: errors name the bad values", (device) => {
  const x = mg.arange(10, { device }).float();
  assert.throws(
    () => x.unfold(0, 11, 1),
    /unfold: maximum size for dim 0 \(shape \[10\]\) is 10 but size is 11/,
  );
  assert.throws(() => x.unfold(0, 3, 0), /unfold: step is 0 but must be > 0/);
  assert.throws(() => x.unfold(1, 3, 1), RangeError);
  assert.throws(() => x.unfold(0, 1.5, 1), /unfold: size must be an integer, got 1.5/);
  assert.throws(() => tensor(2, { device }).unfold(0, 2, 1), /maximum size for a 0-d tensor is 1/);
  assert.throws(
    () => x.asStrided([4, 4], [2, 2]),
    /asStrided: size \[4, 4\], stride \[2, 2\] and storageOffset 0 need 13 elements, but the input \(shape \[10\]\) has 10/,
  );
  assert.throws(
    () => x.asStrided([2], [-1]),
    /negative strides are not supported, got stride \[-1\]/,
  );
  assert.throws(
    () => x.asStrided([2, 2], [1]),
    /size \[2, 2\] and stride \[1\] must have the same length/,
  );
  assert.throws(() => x.asStrided([2], [1], -1), /storageOffset must be >= 0, got -1/);
  assert.throws(
    () => x.splitWithSizes([3, 3]),
    /splitWithSizes: splitSizes \[3,3\] sum to 6, but dim 0 of the input \(shape \[10\]\) has size 10/,
  );
  assert.throws(() => x.narrowCopy(0, 8, 3), /narrow: start 8 and length 3 are out of range/);
  assert.throws(
    () => mg.frexp(mg.arange(3, { device })),
    /frexp: only floating-point dtypes are supported, got int32/,
  );
  assert.throws(
    () => mg.ones([2, 3], { device }).sumToSize([3, 2]),
    /sumToSize: size \[3, 2\] is not expandable to the input's shape \[2, 3\]/,
  );
  assert.throws(
    () => mg.ones([2, 4], { device }).cross(mg.ones([2, 4], { device })),
    /cross: no dimension of size 3 in the input \(shape \[2, 4\]\)/,
  );
  assert.throws(() => x.type("torch.HalfTensor"), /type: unknown type "torch.HalfTensor"/);
  assert.throws(() => x.stride(2), RangeError);
  assert.throws(() => x.qr("no" as unknown as boolean), /qr: some must be a boolean, got string/);
  assert.throws(
    () => x.cholesky(1 as unknown as boolean),
    /cholesky: upper must be a boolean, got number/,
  );
});

// ---- float64 gradient checks on cpu ----

check("unfold overlapping windows", (x) => x.unfold(1, 3, 1), [inp([2, 6, 2], 901)]);
check("unfold with gaps", (x) => x.unfold(0, 2, 3), [inp([8, 2], 902)]);
check("asStrided overlap", (x) => x.asStrided([3, 3], [2, 1], 1), [inp([10], 903)]);
check("asStrided stride 0", (x) => mg.asStrided(x, [2, 3], [0, 2], 1), [inp([2, 4], 904)]);
check("splitWithSizes", (x) => {
  const [a, b] = x.splitWithSizes([1, 3], 1);
  return a.mul(b.sum(1, true));
}, [inp([2, 4], 905)]);
check("narrowCopy", (x) => mg.narrowCopy(x, 1, -3, 2), [inp([3, 5], 906)]);
check("frexp mantissa", (x) => mg.frexp(x)[0], [{
  shape: [6],
  values: [1.5, -3.25, 1e-5, 7e5, 0.3, -0.999],
}]);
check("sumToSize", (x) => x.sumToSize([3, 1]), [inp([2, 3, 4], 907)]);
check("hardshrink method", (x) => x.hardshrink(0.3), [{
  shape: [5],
  values: [-1, 0.1, 0.5, -0.2, 2],
}]);
check("prelu method", (x, w) => x.prelu(w), [inp([2, 3, 2], 908), inp([3], 909)]);
check("det method", (a) => a.det(), [inp([2, 3, 3], 910)]);
check("slogdet method", (a) => a.slogdet()[1], [inp([3, 3], 911)]);
check("matrixPower method", (a) => a.matrixPower(3), [inp([3, 3], 912, -1, 1)]);
check("cross method default dim", (a, b) => a.cross(b), [inp([2, 3, 2], 913), inp([2, 3, 2], 914)]);
check("cholesky method upper", (a) => {
  const spd = a.matmul(a.transpose(0, 1)).add(mg.eye(3, { dtype: "float64" }).mul(3));
  return spd.cholesky(true);
}, [inp([3, 3], 915)]);
check("igamma other", (x) => mg.igamma(tensor([0.5, 2, 3.5], { dtype: "float64" }), x), [{
  shape: [3],
  values: [0.7, 1.5, 4],
}]);
check("igammac method other", (x) => tensor([1, 2.5, 0.8], { dtype: "float64" }).igammac(x), [{
  shape: [3],
  values: [0.2, 3, 1.1],
}]);
check("T and mT", (x) => x.T.mul(x.mT.sum()), [inp([2, 3], 917)]);
check("qr method", (a) => {
  const [q, r] = a.qr();
  return q.sum().add(r.sum());
}, [inp([4, 3], 916)]);
