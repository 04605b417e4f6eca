/**
 * multigrad's benchmarks: one command, a table per suite for every backend
 * that starts (cpu, and webgpu where there is an adapter).
 *
 *   deno task bench [--quick] [--filter NAME]... [--backend NAME]... [--peers]
 *     [--dawn] [--json FILE] [--budget SECONDS]
 *
 * Method (see bench/NOTES.md): every timed run ends with a read of a result
 * (`await t.data()`), so the device really finished; one or more warm-up runs
 * first; the median of several timed runs; a case stops being measured after
 * `--budget` seconds (3 by default).
 * @module
 */

import { parseArgs } from "node:util";
import { backendNames, type Device, requestDevices } from "../mod.ts";
import type { BenchResult, Suite, SuiteContext } from "./suites/_common.ts";
import { matmulSuite } from "./suites/matmul.ts";
import { elementwiseSuite } from "./suites/elementwise.ts";
import { fmodSuite } from "./suites/fmod.ts";
import { mlpSuite } from "./suites/mlp.ts";
import { dataParallelSuite } from "./suites/dataparallel.ts";
import { ddpSuite } from "./suites/ddp.ts";
import { fsdpSuite } from "./suites/fsdp.ts";
import { collectivesSuite } from "./suites/collectives.ts";
import { memorySuite } from "./suites/memory.ts";
import { checkpointSuite } from "./suites/checkpoint.ts";
import { convSuite } from "./suites/conv.ts";
import { smallStepSuite } from "./suites/small_step.ts";
import { stepShapesSuite } from "./suites/step_shapes.ts";
import { sortSuite } from "./suites/sort.ts";
import { linalgSuite } from "./suites/linalg.ts";
import { ctcSuite, embeddingBagSuite } from "./suites/embedding_ctc.ts";
import { conv3dSuite } from "./suites/conv3d.ts";
import { dataWorkersSuite } from "./suites/data_workers.ts";
import { pipeSuite } from "./suites/pipe.ts";
import { type Comparison, type PeerResult, runPeerComparison } from "./suites/peers.ts";
import { runTargets, type TargetResult } from "./suites/targets.ts";
import type { JaxjsPeer } from "./peers/jaxjs.ts";
import { startPytorch } from "./peers/pytorch.ts";

/** Every suite, in the order a full run measures them. */
export const SUITES: readonly Suite[] = [
  matmulSuite,
  elementwiseSuite,
  fmodSuite,
  mlpSuite,
  stepShapesSuite,
  smallStepSuite,
  dataParallelSuite,
  ddpSuite,
  fsdpSuite,
  collectivesSuite,
  memorySuite,
  convSuite,
  sortSuite,
  linalgSuite,
  embeddingBagSuite,
  ctcSuite,
  conv3dSuite,
  dataWorkersSuite,
  pipeSuite,
  checkpointSuite,
];

/** What `--json` writes. */
export interface BenchReport {
  /** Bumped when the shape changes. */
  readonly version: 1;
  /** Where and how the run happened. */
  readonly meta: {
    readonly date: string;
    readonly deno: string;
    readonly v8: string;
    readonly typescript: string;
    readonly os: string;
    readonly arch: string;
    readonly cpus: number;
    /** `Deno.loadavg()` at the start and at the end (others' work skews timings). */
    readonly loadavg: { readonly start: readonly number[]; readonly end: readonly number[] };
    readonly quick: boolean;
    readonly budgetS: number;
    readonly suites: readonly string[];
    /** Backend name to `Device.info`, or to why it did not start. */
    readonly devices: Readonly<Record<string, string>>;
    readonly skippedBackends: Readonly<Record<string, string>>;
    readonly totalS: number;
  };
  /** Every measured number. */
  readonly results: readonly BenchResult[];
  /** The peers' own numbers with `--peers` (else empty). */
  readonly peers: readonly PeerResult[];
  /** multigrad against each peer with `--peers` (else empty). */
  readonly comparisons: readonly Comparison[];
  /** The speed targets with `--peers`, each measured round-robin against its peers (else empty). */
  readonly targets: readonly TargetResult[];
  /** Suites that threw, with the message. */
  readonly errors: readonly { readonly suite: string; readonly message: string }[];
}

const HELP = `multigrad benchmarks

usage: deno task bench [options]
       deno run -A bench/main.ts [options]

options:
  --filter NAME    run only suites whose name contains NAME (repeatable)
  --backend NAME   run only this backend (repeatable; default: every backend that starts)
  --dawn           also register the dawn plugin (npm:webgpu) and time it as backend "dawn"
                   (up to 4 devices per adapter)
  --peers          also run the peer benchmarks (TensorFlow.js, jax-js) and print
                   multigrad's speedup over each
  --quick          smaller sizes and fewer iterations (the CI smoke test)
  --budget SEC     seconds of timed runs per case before it stops (default 3; quick 0.5)
  --json FILE      write every result as JSON to FILE
  -h, --help       this text

suites:
${SUITES.map((s) => `  ${s.name.padEnd(13)}${s.description}`).join("\n")}
`;

function fail(message: string): never {
  console.error(`bench: ${message}\n`);
  console.error(HELP);
  Deno.exit(2);
}

/**
 * jax-js on one backend, loaded on demand (a computed specifier keeps the
 * npm package out of runs without `--peers`).
 */
async function loadJaxjs(device: "wasm" | "webgpu"): Promise<JaxjsPeer | string> {
  const url = new URL("./peers/jaxjs.ts", import.meta.url);
  try {
    const mod = await import(url.href) as typeof import("./peers/jaxjs.ts");
    return await mod.startJaxjs(device);
  } catch (error) {
    return `bench/peers/jaxjs.ts failed to load: ${(error as Error).message}`;
  }
}

/** Runs the benchmarks as the command line asks; returns the report. */
export async function main(args: readonly string[]): Promise<BenchReport> {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...args],
      options: {
        json: { type: "string" },
        filter: { type: "string", multiple: true },
        backend: { type: "string", multiple: true },
        peers: { type: "boolean", default: false },
        dawn: { type: "boolean", default: false },
        quick: { type: "boolean", default: false },
        budget: { type: "string" },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
      allowPositionals: false,
    });
  } catch (error) {
    fail((error as Error).message);
  }
  const opts = parsed.values;
  if (opts.help) {
    console.log(HELP);
    Deno.exit(0);
  }
  const quick = opts.quick ?? false;
  const budgetS = opts.budget === undefined ? (quick ? 0.5 : 3) : Number(opts.budget);
  if (!(budgetS > 0)) fail(`--budget must be a positive number of seconds, got "${opts.budget}"`);
  const filters = opts.filter ?? [];
  const suites = filters.length === 0
    ? SUITES
    : SUITES.filter((s) => filters.some((f) => s.name.includes(f)));
  if (suites.length === 0) {
    fail(
      `--filter ${filters.join(", ")} matches no suite (${SUITES.map((s) => s.name).join(", ")})`,
    );
  }
  const log = (line: string) => console.log(line);
  const started = performance.now();

  if (opts.dawn) {
    // A computed specifier keeps npm:webgpu out of the graph of runs without --dawn.
    const plugin = new URL("../src/backends/dawn/mod.ts", import.meta.url).href;
    const { registerDawn } = await import(plugin) as typeof import("../src/backends/dawn/mod.ts");
    // Four devices per adapter, as DataParallel's largest group asks for.
    registerDawn({ devicesPerAdapter: 4 });
  }
  // Backends: cpu first (the reference), then the others that start.
  const wanted = opts.backend ?? [];
  const registered = backendNames();
  for (const name of wanted) {
    if (!registered.includes(name)) {
      fail(`--backend ${name}: not registered (registered: ${registered.join(", ")})`);
    }
  }
  const order = ["cpu", ...registered.filter((n) => n !== "cpu")]
    .filter((n) => registered.includes(n))
    .filter((n) => wanted.length === 0 || wanted.includes(n));
  const backends: string[] = [];
  const infos: Record<string, string> = {};
  const skipped: Record<string, string> = {};
  for (const name of order) {
    try {
      const [d] = await requestDevices({ backend: name, count: 1 });
      backends.push(name);
      infos[name] = d.info;
    } catch (error) {
      skipped[name] = (error as Error).message;
    }
  }

  const v = Deno.version;
  log(
    `multigrad bench: deno ${v.deno} (v8 ${v.v8}, typescript ${v.typescript}), ` +
      `${Deno.build.os} ${Deno.build.arch}, ${navigator.hardwareConcurrency} cpus`,
  );
  for (const name of backends) log(`  ${name.padEnd(7)} ${infos[name]}`);
  for (const [name, why] of Object.entries(skipped)) log(`  ${name.padEnd(7)} not started: ${why}`);
  const load = Deno.loadavg();
  log(
    `  load average ${load.map((x) => x.toFixed(2)).join(", ")}${
      load[0] > navigator.hardwareConcurrency * 0.75
        ? " -- the machine is busy: timings will be slow and noisy"
        : ""
    }`,
  );
  log(
    `  mode: ${quick ? "quick" : "full"}, time box ${budgetS} s per case, suites: ${
      suites.map((s) => s.name).join(", ")
    }${opts.peers ? ", peers" : ""}`,
  );

  const deviceCache = new Map<string, Promise<Device[]>>();
  const ctx: SuiteContext = {
    backends,
    quick,
    budgetS,
    log,
    devices(backend, count) {
      const key = `${backend}|${count}`;
      let pending = deviceCache.get(key);
      if (!pending) {
        pending = requestDevices({ backend, count });
        deviceCache.set(key, pending);
      }
      return pending;
    },
  };

  const results: BenchResult[] = [];
  const errors: { suite: string; message: string }[] = [];
  for (const suite of suites) {
    const t0 = performance.now();
    try {
      results.push(...await suite.run(ctx));
    } catch (error) {
      const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
      errors.push({ suite: suite.name, message });
      log(`  ${suite.name} FAILED: ${message}`);
    }
    log(`  (${suite.name}: ${((performance.now() - t0) / 1000).toFixed(1)} s)`);
  }

  let peers: PeerResult[] = [];
  let comparisons: Comparison[] = [];
  let targets: TargetResult[] = [];
  if (opts.peers) {
    const t0 = performance.now();
    try {
      ({ peers, comparisons } = await runPeerComparison(
        ctx,
        results,
        suites.map((s) => s.name),
      ));
    } catch (error) {
      const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
      errors.push({ suite: "peers", message });
      log(`  peers FAILED: ${message}`);
    }
    log(`  (peers: ${((performance.now() - t0) / 1000).toFixed(1)} s)`);
    const t1 = performance.now();
    try {
      const torch = await startPytorch();
      try {
        const found = await runTargets(ctx, loadJaxjs, torch, suites.map((s) => s.name));
        targets = found.targets;
        results.push(...found.results);
      } finally {
        if (typeof torch !== "string") await torch.close();
      }
    } catch (error) {
      const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
      errors.push({ suite: "targets", message });
      log(`  targets FAILED: ${message}`);
    }
    log(`  (targets: ${((performance.now() - t1) / 1000).toFixed(1)} s)`);
  }

  const totalS = (performance.now() - started) / 1000;
  log("");
  log(`total ${totalS.toFixed(1)} s${errors.length ? `, ${errors.length} suite(s) failed` : ""}`);

  const report: BenchReport = {
    version: 1,
    meta: {
      date: new Date().toISOString(),
      deno: v.deno,
      v8: v.v8,
      typescript: v.typescript,
      os: Deno.build.os,
      arch: Deno.build.arch,
      cpus: navigator.hardwareConcurrency,
      loadavg: { start: load, end: Deno.loadavg() },
      quick,
      budgetS,
      suites: suites.map((s) => s.name),
      devices: infos,
      skippedBackends: skipped,
      totalS,
    },
    results,
    peers,
    comparisons,
    targets,
    errors,
  };
  if (opts.json) {
    await Deno.writeTextFile(opts.json, JSON.stringify(report, null, 2) + "\n");
    log(`results written to ${opts.json}`);
  }
  return report;
}

if (import.meta.main) {
  const report = await main(Deno.args);
  // Devices hold native handles (GPUDevices, pools): exit rather than wait for them.
  Deno.exit(report.errors.length > 0 ? 1 : 0);
}
