/**
 * The DistributedDataParallel examples: seed 003's DDP forward prints the
 * DataParallel tutorial's shapes on every rank; the training example
 * learns with bit-identical ranks, under spawn and under mpiexec.
 * @module
 */

import assert from "node:assert/strict";
import { run as seed003 } from "../examples/seed003_ddp.ts";
import type { RankSummary } from "../examples/ddp_train.ts";
import { distributed } from "../mod.ts";
import { BACKENDS } from "./harness.ts";
import { MPICH_MPIEXEC } from "./mpiexec.ts";
import { runBench } from "./bench_run.ts";

/** What the ddp suite test reads of the bench report. */
type Report = { results: { case: string; extra: Record<string, number> }[] };

const opts = { sanitizeOps: false, sanitizeResources: false };
const TRAIN = new URL("../examples/ddp_train.ts", import.meta.url);

for (const backend of BACKENDS.keys()) {
  Deno.test({
    ...opts,
    name:
      `seed 003 (DDP): each of 2 ranks sees [15, 5] x3 then [5, 5], moved to its own device [${backend}]`,
    fn: async () => {
      const lines: string[] = [];
      const ranks = await seed003({ backend }, (line) => lines.push(line));
      assert.equal(ranks.length, 2);
      ranks.forEach((rankLines, rank) => {
        assert.match(
          rankLines[0],
          new RegExp(`^rank ${rank} of 2 on ${backend}:0: 50 of 100 rows$`),
        );
        assert.deepEqual(rankLines.filter((l) => l.startsWith("\tIn Model")), [
          ...Array(3).fill("\tIn Model: input size [15, 5] output size [15, 2]"),
          "\tIn Model: input size [5, 5] output size [5, 2]",
        ]);
        const outside = rankLines.filter((l) => l.startsWith("Outside"));
        assert.equal(outside.length, 4);
        assert.match(
          outside[0],
          new RegExp(
            `^Outside: input size \\[15, 5\\] moved from cpu:0 to ${backend}:0, output_size \\[15, 2\\] \\(global batch \\[30, 5\\]\\)$`,
          ),
        );
      });
      // Both ranks end with the same averaged gradient.
      assert.equal(ranks[0].at(-1)!.split("= ")[1], ranks[1].at(-1)!.split("= ")[1]);
      assert.equal(lines.length, ranks[0].length + ranks[1].length);
    },
  });
}

Deno.test({
  ...opts,
  name: "ddp_train example: 2 spawned cpu ranks learn and stay bit-identical",
  fn: async () => {
    const ranks = await distributed.spawn<RankSummary>(TRAIN, {
      nprocs: 2,
      args: [{ backend: "cpu", epochs: 4, pointsPerClass: 300, lr: 0.03, verbose: false }],
    });
    assert.equal(ranks[0].checksum, ranks[1].checksum);
    assert.deepEqual(ranks[0].losses, ranks[1].losses);
    assert.ok(ranks[0].losses[3] < ranks[0].losses[0], `loss falls: ${ranks[0].losses}`);
  },
});

Deno.test({
  ...opts,
  name: "ddp_train example: the same file under mpiexec -n 2",
  ignore: !MPICH_MPIEXEC,
  fn: async () => {
    const out = await new Deno.Command("mpiexec", {
      args: [
        "-n",
        "2",
        Deno.execPath(),
        "run",
        "-A",
        TRAIN.pathname,
        "--backend",
        "cpu",
        "--epochs",
        "2",
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout);
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    assert.match(
      text,
      /^2 ranks \(mpi\), each on its own device; 2400 training rows, 1200 per rank per epoch$/m,
    );
    assert.match(text, /^epoch 2\/2 {2}loss \d\.\d{4}/m);
    assert.match(text, /^held-out accuracy \d+\.\d%$/m);
  },
});

Deno.test({
  ...opts,
  name: "demo --ddp 2: two ranks train, rank 0 reports, checkpoints and plots; --resume continues",
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "multigrad_demo_ddp_" });
    const demo = (...args: string[]) =>
      new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", new URL("../examples/demo.ts", import.meta.url).pathname, ...args],
        stdout: "piped",
        stderr: "piped",
      }).output();
    try {
      const first = await demo("--ddp", "2", "--devices", "cpu", "--epochs", "1", "--out", dir);
      const text = new TextDecoder().decode(first.stdout);
      assert.equal(first.code, 0, new TextDecoder().decode(first.stderr));
      assert.match(
        text,
        /^DistributedDataParallel over 2 rank\(s\) \(Workers\), each on its own cpu device$/m,
      );
      assert.match(text, /batch 128 split over 2 DDP ranks; 29 steps per epoch/);
      assert.match(text, /^\tIn Model: input size \[64, 2\] output size \[64, 3\]$/m);
      assert.equal(text.match(/^epoch 1\/1 /gm)?.length, 1, "one rank reports");
      assert.match(text, /^Ranks' devices: 0: cpu:0, 1: cpu:0$/m);
      await Deno.stat(`${dir}/checkpoint.safetensors`);
      await Deno.stat(`${dir}/loss.svg`);
      const resumed = await demo(
        "--ddp",
        "2",
        "--devices",
        "cpu",
        "--epochs",
        "2",
        "--out",
        dir,
        "--resume",
      );
      const again = new TextDecoder().decode(resumed.stdout);
      assert.equal(resumed.code, 0, new TextDecoder().decode(resumed.stderr));
      assert.match(again, /Resumed from .* at epoch 1/);
      assert.match(again, /^epoch 2\/2 /m);
      const bad = await demo("--ddp", "2", "--devices", "cpu", "--batch-size", "127", "--out", dir);
      assert.equal(bad.code, 1);
      assert.match(
        new TextDecoder().decode(bad.stderr),
        /error: batch size 127 does not split evenly over 2 ranks/,
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  ...opts,
  name: "bench: the ddp suite runs (--quick --filter ddp --backend cpu) and reports its ratios",
  fn: async () => {
    const out = await runBench<Report>(["--quick", "--filter", "ddp", "--backend", "cpu"]);
    const text = out.stdout;
    assert.equal(out.code, 0, text + out.stderr);
    assert.match(text, /spawn +\| cpu +\| 2 DDP ranks x 128 .*% of ceiling/);
    const ddp = out.report!.results.find((r) => r.case === "spawn 2 DDP ranks x 128")!;
    assert.ok(ddp.extra.ofCeiling > 0 && Number.isFinite(ddp.extra.ofCeiling));
    assert.ok(ddp.extra.ofLockstep > 0 && Number.isFinite(ddp.extra.ofLockstep));
    assert.match(text, /spawn +\| cpu +\| 2 ranks x 128, a barrier per step .*% of ceiling/);
    if (MPICH_MPIEXEC) assert.match(text, /mpi +\| cpu +\| 2 DDP ranks x 128/);
  },
});
