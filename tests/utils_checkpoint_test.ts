/**
 * utils.checkpoint (PyTorch 1.13's torch.utils.checkpoint): gradients of
 * inputs and parameters equal to the same function run without
 * checkpointing, on every backend, in both variants; dropout inside, several
 * outputs (some unused), non-tensor arguments, nesting, double backward,
 * autograd.grad; checkpointSequential's segments against PyTorch (fixture).
 */

import assert from "node:assert/strict";
import {
  autograd,
  type Device,
  isGradEnabled,
  manualSeed,
  nn,
  noGrad,
  randn,
  type Tensor,
  utils,
} from "../mod.ts";
import { assertClose, backendTest } from "./harness.ts";
import fixtures from "./fixtures/torch_checkpoint.json" with { type: "json" };

const { checkpoint, checkpointSequential } = utils.checkpoint;
const VARIANTS = [{ useReentrant: true }, { useReentrant: false }] as const;

/** Linear, Tanh, Dropout, Linear with seeded weights on `d`. */
function block(seed: number, d: Device, p = 0.5): nn.Sequential {
  manualSeed(seed);
  return new nn.Sequential(
    new nn.Linear(4, 6),
    new nn.Tanh(),
    new nn.Dropout(p),
    new nn.Linear(6, 3),
  ).to(d);
}

async function gradsOf(ts: Tensor[]): Promise<number[][]> {
  const out: number[][] = [];
  for (const t of ts) {
    assert.ok(t.grad, "a gradient");
    out.push(Array.from(await t.grad.data()));
  }
  return out;
}

function same(a: number[][], b: number[][], what: string): void {
  assert.equal(a.length, b.length);
  a.forEach((g, i) => assertClose(g, b[i], { atol: 1e-5, what: `${what} ${i}` }));
}

/** Runs `loss(model, x)` twice (plain, then checkpointed) from the same seed; compares. */
async function compare(
  d: Device,
  run: (m: nn.Sequential, x: Tensor, ck: boolean) => Tensor,
  what: string,
): Promise<void> {
  const results: number[][][] = [];
  for (const ck of [false, true]) {
    const m = block(5, d);
    manualSeed(9);
    const x = randn([5, 4], { device: d, requiresGrad: true });
    manualSeed(11);
    run(m, x, ck).backward();
    results.push(await gradsOf([x, ...m.parameters()]));
  }
  same(results[1], results[0], what);
}

for (const options of VARIANTS) {
  const tag = `useReentrant ${options.useReentrant}`;
  backendTest(
    `checkpoint (${tag}): input and parameter gradients equal the plain run, dropout inside`,
    async (d) => {
      await compare(d, (m, x, ck) => {
        const f = (t: Tensor) => m.forward(t) as Tensor;
        return (ck ? checkpoint(f, [x], options) : f(x)).pow(2).sum();
      }, tag);
    },
  );

  backendTest(
    `checkpoint (${tag}): several outputs, one unused, non-tensor arguments`,
    async (d) => {
      await compare(d, (m, x, ck) => {
        const f = (t: Tensor, scale: number, tag: string): Tensor[] => {
          assert.equal(tag, "label");
          const h = (m.forward(t) as Tensor).mul(scale);
          return [h.tanh(), h.exp(), t.sin()];
        };
        const [a, , c] = ck ? checkpoint(f, [x, 2.5, "label"], options) : f(x, 2.5, "label");
        return a.sum().add(c.mul(c).sum());
      }, tag);
    },
  );

  backendTest(`checkpoint (${tag}): nested checkpoints`, async (d) => {
    await compare(d, (m, x, ck) => {
      const inner = (t: Tensor) => (m.at(0).forward(t) as Tensor).tanh();
      const outer = (t: Tensor) => {
        const h = ck ? checkpoint(inner, [t], options) : inner(t);
        return m.at(3).forward(m.at(2).forward(h) as Tensor) as Tensor;
      };
      return (ck ? checkpoint(outer, [x], options) : outer(x)).sum();
    }, tag);
  });

  backendTest(`checkpoint (${tag}): double backward equals the plain run`, async (d) => {
    const results: number[][] = [];
    for (const ck of [false, true]) {
      const m = block(6, d, 0);
      manualSeed(3);
      const x = randn([3, 4], { device: d, requiresGrad: true });
      const f = (t: Tensor) => (m.forward(t) as Tensor).pow(2);
      const y = (ck ? checkpoint(f, [x], options) : f(x)).sum();
      y.backward(undefined, { createGraph: true });
      const w = m.at(0).parameters()[0];
      const penalty = x.grad!.pow(2).sum().add(w.grad!.pow(2).sum());
      for (const p of [x, ...m.parameters()]) p.grad = null;
      penalty.backward();
      // Which leaves a second derivative reaches must agree too (null: none).
      for (const p of [x, ...m.parameters()]) {
        results.push(p.grad ? Array.from(await p.grad.data()) : []);
      }
    }
    const n = results.length / 2;
    same(results.slice(n), results.slice(0, n), `${tag} second derivative`);
  });

  backendTest(
    `checkpoint (${tag}): parameters get gradients when no input requires grad`,
    async (d) => {
      const results: number[][][] = [];
      for (const ck of [false, true]) {
        const m = block(7, d);
        manualSeed(1);
        const x = randn([2, 4], { device: d });
        manualSeed(2);
        const f = (t: Tensor) => m.forward(t) as Tensor;
        const y = ck ? checkpoint(f, [x], options) : f(x);
        assert.ok(y.requiresGrad);
        y.sum().backward();
        results.push(await gradsOf(m.parameters()));
      }
      same(results[1], results[0], tag);
    },
  );
}

backendTest(
  "checkpoint: autograd.grad works without reentrance, and is a clear error with it",
  async (d) => {
    const m = block(8, d, 0);
    const x = randn([3, 4], { device: d, requiresGrad: true });
    const f = (t: Tensor) => m.forward(t) as Tensor;
    const [plain] = autograd.grad(f(x).sum(), x);
    const [viaCk] = autograd.grad(checkpoint(f, [x], { useReentrant: false }).sum(), x);
    assertClose(await viaCk!.data(), await plain!.data(), { atol: 1e-6 });
    assert.equal(m.parameters()[0].grad, null, "autograd.grad touches no .grad");
    const y = checkpoint(f, [x]).sum();
    assert.throws(() => autograd.grad(y, x), /reentrant.*autograd\.grad.*useReentrant: false/);
    const z = checkpoint(f, [x]).sum();
    assert.throws(
      () => autograd.backward(z, undefined, { inputs: [x] }),
      /not compatible with autograd\.grad/,
    );
  },
);

backendTest("checkpoint: the forward keeps no graph inside fn; noGrad is a plain call", (d) => {
  const m = block(9, d);
  const x = randn([2, 4], { device: d, requiresGrad: true });
  const y = checkpoint((t: Tensor) => m.forward(t) as Tensor, [x]);
  assert.equal(y.gradFn!.name, "CheckpointBackward");
  assert.deepEqual([...y.gradFn!.producers()], []);
  assert.equal(noGrad(() => checkpoint((t: Tensor) => t.exp(), [x])).gradFn, null);
  // An argument returned as it is: a new tensor, x itself keeps no node.
  const same = checkpoint((t: Tensor) => t, [x]);
  assert.notEqual(same, x);
  assert.ok(x.isLeaf);
});

backendTest("checkpoint: bad arguments are clear errors", (d) => {
  const x = randn([2], { device: d, requiresGrad: true });
  assert.throws(
    () => checkpoint((t: Tensor) => t.exp(), x as unknown as [Tensor]),
    /args must be an array/,
  );
  assert.throws(
    () => checkpoint((() => 3) as unknown as (t: Tensor) => Tensor, [x]),
    /must return a Tensor or a non-empty array of Tensors, got number/,
  );
  assert.throws(
    () => checkpoint((t: Tensor) => t.exp(), [x], { useReentrant: 1 as unknown as boolean }),
    /useReentrant must be a boolean/,
  );
  assert.throws(
    () => checkpoint((t: Tensor) => t.exp(), [x], { reentrant: true } as never),
    /unexpected option reentrant/,
  );
});

Deno.test("checkpointSequential: which functions each checkpoint runs equals PyTorch (fixture)", () => {
  for (const { n, segments, checkpointed, error } of fixtures.sequential) {
    const fns = Array.from({ length: n }, () => (t: Tensor) => t.mul(1));
    const x = randn([2], { requiresGrad: true });
    if (error) {
      assert.throws(() => checkpointSequential(fns, segments, x), /segments must be at most/);
      continue;
    }
    // The first function of each checkpoint opens its group; leaving the checkpoint closes it.
    const ck: number[][] = [];
    let open: number[] | null = null;
    const probe = fns.map((_, i) => (t: Tensor) => {
      const inside = !isGradEnabled();
      if (inside && open === null) ck.push(open = []);
      if (!inside) open = null;
      open?.push(i);
      return t.mul(1);
    });
    const y = checkpointSequential(probe, segments, x);
    // Segments are separate checkpoints even when adjacent: each has its own node.
    const nodes: number[] = [];
    for (let n = y.gradFn; n; n = [...n.producers()][0] ?? null) {
      if (n.name === "CheckpointBackward") nodes.push(1);
    }
    assert.equal(nodes.length, checkpointed.length, `n=${n}, segments=${segments}: checkpoints`);
    const flat = checkpointed.flat();
    assert.deepEqual(ck.flat(), flat, `n=${n}, segments=${segments}`);
  }
});

backendTest(
  "checkpointSequential: gradients equal the plain Sequential, an nn.Sequential taken apart",
  async (d) => {
    const results: number[][][] = [];
    for (const segments of [0, 1, 2, 3]) {
      const m = block(12, d);
      manualSeed(4);
      const x = randn([3, 4], { device: d, requiresGrad: true });
      manualSeed(5);
      const y = segments === 0 ? m.forward(x) as Tensor : checkpointSequential(m, segments, x);
      y.pow(2).sum().backward();
      results.push(await gradsOf([x, ...m.parameters()]));
    }
    for (const k of [1, 2, 3]) same(results[k], results[0], `segments ${k}`);
  },
);

backendTest(
  "checkpoint: preserveRngState false recomputes with the generator as it is then (another dropout mask)",
  async (d) => {
    const m = block(13, d, 0.5);
    manualSeed(1);
    const x = randn([8, 4], { device: d, requiresGrad: true });
    manualSeed(2);
    const f = (t: Tensor) => m.forward(t) as Tensor;
    f(x).sum().backward();
    const plain = Array.from(await x.grad!.data());
    x.grad = null;
    manualSeed(2);
    checkpoint(f, [x], { preserveRngState: false }).sum().backward();
    const other = Array.from(await x.grad!.data());
    assert.notDeepEqual(other, plain);
  },
);
