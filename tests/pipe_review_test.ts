/**
 * Review of parallel.Pipe's tuples: each partition runs as a module call, as
 * PyTorch's `PipeSequential` partitions are called (`partition(*inputs)`), so
 * forward pre-hooks, forward hooks, full backward hooks and the global module
 * hooks on `pipe.partitions[j]` fire once per micro-batch, with a tuple's
 * items as the arguments; hooks on the layers fire too.
 */

import assert from "node:assert/strict";
import { manualSeed, nn, parallel, randn, requestDevices, type Tensor } from "../mod.ts";
import { assertClose } from "./harness.ts";

const cpus = await requestDevices({ backend: "cpu", count: 2 });

function test(name: string, fn: () => Promise<void> | void): void {
  Deno.test({ name, sanitizeOps: false, sanitizeResources: false, fn });
}

/** x → [fc(x), x]: one tensor in, a tuple out. */
class Fork extends nn.Module {
  fc = new nn.Linear(3, 3);
  override forward(x: Tensor): Tensor[] {
    return [this.fc.forward(x), x];
  }
}

/** (a, b) → fc(a · b). */
class Join extends nn.Module {
  fc = new nn.Linear(3, 1);
  override forward(a: Tensor, b: Tensor): Tensor {
    return this.fc.forward(a.mul(b));
  }
}

function pipeOf(chunks: number): [parallel.Pipe, Fork, Join] {
  manualSeed(3);
  const fork = new Fork().to(cpus[0]);
  const join = new Join().to(cpus[1]);
  const pipe = new parallel.Pipe(new nn.Sequential(fork, join), { chunks, checkpoint: "never" });
  return [pipe, fork, join];
}

for (const chunks of [1, 3]) {
  test(`Pipe (chunks ${chunks}): hooks on the partitions fire per micro-batch, with the tuple's items as arguments`, async () => {
    const [pipe, fork, join] = pipeOf(chunks);
    const log: string[] = [];
    const [p0, p1] = [...pipe.partitions];
    const handles = [
      p0.registerForwardPreHook((_m, args) => void log.push(`pre0:${args.length}`)),
      p0.registerForwardHook((_m, _args, out) =>
        void log.push(`fwd0:${Array.isArray(out) ? out.length : "t"}`)
      ),
      p1.registerForwardPreHook((_m, args) => void log.push(`pre1:${args.length}`)),
      // A forward hook's value replaces the output, as PyTorch's.
      p1.registerForwardHook((_m, _args, out) => (out as Tensor).mul(2)),
      p1.registerFullBackwardHook(() => void log.push("bwd1")),
      fork.registerForwardHook(() => void log.push("fork")),
      join.registerForwardHook(() => void log.push("join")),
    ];
    const x = randn([6, 3], { device: cpus[0], requiresGrad: true });
    const out = pipe.forward(x);
    const [a, b] = fork.forward(x).map((t) => t.to(cpus[1]));
    const want = join.forward(a, b).mul(2);
    assertClose(await out.data(), await want.data(), { what: "output with the hook's * 2" });
    const count = (s: string) => log.filter((e) => e === s).length;
    // 1 for the reference run above.
    assert.deepEqual(
      [count("pre0:1"), count("fwd0:2"), count("pre1:2"), count("fork"), count("join")],
      [chunks, chunks, chunks, chunks + 1, chunks + 1],
      log.join(" "),
    );
    out.sum().backward();
    assert.equal(count("bwd1"), chunks, log.join(" "));
    for (const h of handles) h.remove();
  });
}

test("Pipe: the global module forward hooks see the partitions as PyTorch's (a module call each)", () => {
  const [pipe] = pipeOf(2);
  const seen: nn.Module[] = [];
  const handle = nn.registerModuleForwardHook((m) => void seen.push(m));
  try {
    pipe.forward(randn([4, 3], { device: cpus[0] }));
  } finally {
    handle.remove();
  }
  const [p0, p1] = [...pipe.partitions];
  assert.equal(seen.filter((m) => m === p0).length, 2);
  assert.equal(seen.filter((m) => m === p1).length, 2);
});

test("Pipe: as PyTorch's, a nested Sequential's layers join the partition, so hooks on its children fire and those on it or on the outer Sequential do not", () => {
  manualSeed(4);
  const inner = new nn.Sequential(new nn.Linear(3, 3).to(cpus[0]), new nn.Tanh());
  const outer = new nn.Sequential(new nn.Linear(3, 3).to(cpus[0]), inner, new nn.Linear(3, 1));
  outer.at(2).to(cpus[1]);
  const log: string[] = [];
  const named: [string, nn.Module][] = [
    ["outer", outer],
    ["inner", inner],
    ["inner0", inner.at(0)],
    ["lin0", outer.at(0)],
  ];
  for (const [name, m] of named) m.registerForwardHook(() => void log.push(name));
  const pipe = new parallel.Pipe(outer, { chunks: 3, checkpoint: "never" });
  pipe.forward(randn([6, 3], { device: cpus[0] }));
  // PyTorch 1.13 (cpu partitions, chunks 3): lin0 and inner0 3 times each, inner and outer never.
  assert.deepEqual(
    ["outer", "inner", "inner0", "lin0"].map((n) => log.filter((e) => e === n).length),
    [0, 0, 3, 3],
  );
});
