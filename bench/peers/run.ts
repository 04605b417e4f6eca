/**
 * CLI for the peer benchmarks.
 *
 * ```sh
 * deno run -A bench/peers/run.ts --suite matmul --suite mlp \
 *   [--size 256 --size 1024] [--steps 10] [--json out.json] [--quiet]
 * ```
 *
 * Prints a table of every peer / backend / case. Without `--suite`, runs both
 * suites.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { cpuJiffies, otherLoad } from "./common.ts";
import { JAXJS_VERSION, type PeerResult, type PeerSuite, runPeers, TFJS_VERSION } from "./mod.ts";

const SUITES: readonly PeerSuite[] = ["matmul", "mlp"];

function isSuite(s: string): s is PeerSuite {
  return (SUITES as readonly string[]).includes(s);
}

function positiveInt(s: string, flag: string): number {
  const n = Number(s);
  if (!Number.isInteger(n) || n <= 0) {
    throw new Error(`${flag} expects a positive integer, got "${s}"`);
  }
  return n;
}

/** Formats result rows as a fixed-width text table. */
export function formatTable(rows: readonly PeerResult[]): string {
  const head = ["peer", "backend", "suite", "value", "unit", "note"];
  const body = rows.map((r) => [
    r.peer,
    r.backend,
    r.suite,
    Number.isNaN(r.value) ? "NaN" : r.value.toFixed(r.value < 10 ? 2 : 1),
    r.unit,
    r.note ?? "",
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((row) => row[i].length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => i === 3 ? c.padStart(widths[i]) : c.padEnd(widths[i])).join("  ").trimEnd();
  return [
    line(head),
    line(widths.map((w) => "-".repeat(w))),
    ...body.map(line),
  ].join("\n");
}

async function main(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      suite: { type: "string", multiple: true },
      size: { type: "string", multiple: true },
      steps: { type: "string" },
      json: { type: "string" },
      quiet: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(
      "usage: deno run -A bench/peers/run.ts [--suite matmul|mlp]... " +
        "[--size N]... [--steps N] [--json FILE] [--quiet]",
    );
    return 0;
  }
  const suites: PeerSuite[] = [];
  for (const s of values.suite ?? SUITES) {
    if (!isSuite(s)) throw new Error(`unknown suite "${s}"`);
    suites.push(s);
  }
  const sizes = values.size?.map((s) => positiveInt(s, "--size"));
  const steps = values.steps === undefined ? undefined : positiveInt(values.steps, "--steps");
  const log = values.quiet ? undefined : (line: string) => console.error(`[peers] ${line}`);
  const cpu0 = cpuJiffies();
  const t0 = performance.now();
  const rows = await runPeers({ suites, sizes, steps, log });
  const secs = (performance.now() - t0) / 1000;
  console.log(
    `peers: tfjs@${TFJS_VERSION} (cpu, webgpu), jax-js@${JAXJS_VERSION} ` +
      `(wasm, webgpu); ${Deno.build.target}; ${navigator.hardwareConcurrency} ` +
      `cores; ${secs.toFixed(1)} s; CPU used by other processes meanwhile: ` +
      otherLoad(cpu0, cpuJiffies(), secs),
  );
  console.log(formatTable(rows));
  if (values.json) {
    await Deno.writeTextFile(values.json, JSON.stringify(rows, null, 2) + "\n");
  }
  return 0;
}

if (import.meta.main) {
  // Exit explicitly: peer worker pools / GPU devices can keep the process up.
  Deno.exit(await main(Deno.args));
}
