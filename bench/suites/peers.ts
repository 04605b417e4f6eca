/**
 * `--peers`: runs the peer benchmarks (`bench/peers/mod.ts`: TensorFlow.js,
 * jax-js) in the same process and prints multigrad's speedup over each: for
 * throughputs (GFLOP/s) ours / theirs, for times (ms/step) theirs / ours, so
 * above 1 means multigrad is faster. The peers module is imported
 * dynamically: where it fails to load the run goes on with a note.
 * @module
 */

import { type BenchResult, fmt, measure, type SuiteContext, Table } from "./_common.ts";
import { benchMatmul } from "./matmul.ts";
import { benchConv, CONV_SPEC_QUICK } from "./conv.ts";
import { CONV_SPEC, convCase } from "../peers/common.ts";
import { createMlp, MLP_CONFIG, runStep } from "./mlp.ts";
import type { PeerResult, runPeers } from "../peers/mod.ts";

export type { PeerResult };

interface PeersModule {
  runPeers: typeof runPeers;
}

/** multigrad against one peer result. */
export interface Comparison {
  /** `"matmul"` or `"mlp"`. */
  readonly suite: string;
  /** Our backend. */
  readonly backend: string;
  /** The peer's backend (jax-js `wasm` is compared with our `cpu`). */
  readonly peerBackend: string;
  /** `"1024"` or `"step"`. */
  readonly case: string;
  /** The peer. */
  readonly peer: string;
  /** Our number and unit. */
  readonly ours: number;
  /** Unit of `ours`. */
  readonly oursUnit: string;
  /** Their number. */
  readonly theirs: number;
  /** Unit of `theirs`. */
  readonly theirsUnit: string;
  /** Above 1: multigrad is faster. NaN when the units do not compare. */
  readonly speedup: number;
  /** The peer's note. */
  readonly note?: string;
}

/** `"matmul-1024"` to matmul / `"1024"`; `"mlp-..."` to mlp / `"step"`. */
export function parsePeerSuite(name: string, size: number): { suite: string; kase: string } {
  if (name.startsWith("matmul")) {
    const m = /(\d+)$/.exec(name);
    return { suite: "matmul", kase: m ? m[1] : String(size) };
  }
  if (name.startsWith("mlp")) return { suite: "mlp", kase: "step" };
  if (name.startsWith("conv-")) return { suite: "conv", kase: name.slice("conv-".length) };
  return { suite: name, kase: "" };
}

/** Milliseconds per unit for time units; null for throughputs. */
function msPer(unit: string): number | null {
  const u = unit.trim().toLowerCase();
  if (/^ms(\/|$)/.test(u)) return 1;
  if (/^(s|sec)(\/|$)/.test(u)) return 1000;
  if (/^(us|µs)(\/|$)/.test(u)) return 1e-3;
  return null;
}

/** Speedup of ours over theirs: throughputs ours/theirs, times theirs/ours. */
export function speedupOf(
  ours: number,
  oursUnit: string,
  theirs: number,
  theirsUnit: string,
): number {
  const a = msPer(oursUnit);
  const b = msPer(theirsUnit);
  if (a !== null && b !== null) return (theirs * b) / (ours * a);
  if (a === null && b === null && oursUnit.toLowerCase() === theirsUnit.toLowerCase()) {
    return ours / theirs;
  }
  return NaN;
}

async function loadPeers(): Promise<PeersModule | string> {
  // A computed specifier: a literal one would put the peers and their npm
  // packages in the module graph of every run, --peers or not.
  const url = new URL("../peers/mod.ts", import.meta.url);
  try {
    const mod = await import(url.href) as Partial<PeersModule>;
    if (typeof mod.runPeers !== "function") return "bench/peers/mod.ts exports no runPeers()";
    return mod as PeersModule;
  } catch (error) {
    return `bench/peers/mod.ts failed to load: ${(error as Error).message}`;
  }
}

/**
 * Runs the peers and compares: matmul at 1024 (256 when quick) and the MLP
 * step, on every backend both sides ran. Our numbers come from `ours` where
 * this run measured them, else they are measured here.
 */
export async function runPeerComparison(
  ctx: SuiteContext,
  ours: readonly BenchResult[],
  selected?: readonly string[],
): Promise<{ peers: PeerResult[]; comparisons: Comparison[] }> {
  const size = ctx.quick ? 256 : 1024;
  const steps = ctx.quick ? 3 : 10;
  const conv = ctx.quick ? CONV_SPEC_QUICK : CONV_SPEC;
  // The peer suites of the suites this run selected (all when none of them is).
  const all = ["matmul", "mlp", "conv"] as const;
  const chosen = all.filter((s) => selected?.includes(s));
  const suites = chosen.length > 0 ? chosen : [...all];
  ctx.log("");
  ctx.log(
    `peers: ${suites.join(", ")} (matmul ${size}, the MLP step 784-512-512-10 b256, Conv2d ${
      convCase(conv)
    }) in TensorFlow.js and jax-js`,
  );
  const mod = await loadPeers();
  if (typeof mod === "string") {
    ctx.log(`  NOTE: ${mod}`);
    return { peers: [], comparisons: [] };
  }
  const peers = await mod.runPeers({
    suites,
    sizes: [size],
    conv,
    steps,
    log: (line) => ctx.log(`  [peers] ${line}`),
  });

  const mine = [...ours];
  const find = (suite: string, backend: string, kase: string) =>
    mine.find((r) => r.suite === suite && r.backend === backend && r.case === kase);
  const comparisons: Comparison[] = [];
  const table = new Table(
    "peers: multigrad speedup = peer ms / our ms, or our GFLOP/s / theirs (above 1: multigrad" +
      " faster); jax-js wasm is set against multigrad cpu",
    [
      { title: "suite", width: 6, right: false },
      { title: "backend", width: 11, right: false },
      { title: "case", width: 4, right: false },
      { title: "multigrad", width: 16 },
      { title: "peer", width: 7, right: false },
      { title: "peer value", width: 16 },
      { title: "speedup", width: 7 },
      { title: "note", width: 4, right: false },
    ],
    ctx.log,
  );
  for (const p of peers) {
    const { suite, kase } = parsePeerSuite(p.suite, size);
    const backend = p.backend === "wasm" ? "cpu" : p.backend;
    const shownBackend = backend === p.backend ? backend : `${p.backend}/${backend}`;
    const theirs = `${fmt(p.value)} ${p.unit}`;
    if (!ctx.backends.includes(backend)) {
      table.row([suite, shownBackend, kase, "(not run)", p.peer, theirs, "", p.note ?? ""]);
      continue;
    }
    let r = find(suite, backend, kase);
    if (!r && suite === "matmul" && kase !== String(size)) {
      table.row([suite, shownBackend, kase, "(other size)", p.peer, theirs, "", p.note ?? ""]);
      continue;
    }
    if (!r) {
      r = await measureOurs(ctx, suite, backend, Number(kase));
      if (r) mine.push(r);
    }
    if (!r) {
      table.row([suite, shownBackend, kase, "(no match)", p.peer, theirs, "", p.note ?? ""]);
      continue;
    }
    const speedup = speedupOf(r.value, r.unit, p.value, p.unit);
    comparisons.push({
      suite,
      backend,
      peerBackend: p.backend,
      case: kase,
      peer: p.peer,
      ours: r.value,
      oursUnit: r.unit,
      theirs: p.value,
      theirsUnit: p.unit,
      speedup,
      ...(p.note ? { note: p.note } : {}),
    });
    table.row([
      suite,
      shownBackend,
      kase,
      `${fmt(r.value)} ${r.unit}`,
      p.peer,
      theirs,
      Number.isFinite(speedup) ? `${fmt(speedup)}x` : "n/a",
      p.note ?? "",
    ]);
  }
  if (peers.length === 0) table.note("the peers returned no results");
  return { peers, comparisons };
}

/** Measures our side of a comparison that this run's suites did not cover. */
async function measureOurs(
  ctx: SuiteContext,
  suite: string,
  backend: string,
  size: number,
): Promise<BenchResult | undefined> {
  const [device] = await ctx.devices(backend, 1);
  if (suite === "matmul") {
    return await benchMatmul(device, size, ctx.budgetS, ctx.quick ? 30 : 300);
  }
  if (suite === "conv") {
    return await benchConv(device, ctx.quick ? CONV_SPEC_QUICK : CONV_SPEC, ctx.budgetS);
  }
  if (suite === "mlp") {
    const s = createMlp(device, MLP_CONFIG);
    try {
      const timing = await measure(async () => {
        await runStep(s);
      }, { warmup: 2, minRuns: ctx.quick ? 1 : 3, budgetS: ctx.budgetS });
      return {
        suite: "mlp",
        backend,
        case: "step",
        value: timing.medianMs,
        unit: "ms/step",
        runs: timing.runs,
        medianMs: timing.medianMs,
      };
    } finally {
      s.dispose();
    }
  }
  return undefined;
}
