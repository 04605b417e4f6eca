/**
 * `deno task build`: the browser bundle `dist/multigrad.js` (one ES module,
 * everything `mod.ts` exports), made with esbuild from `scripts/browser_entry.ts`.
 *
 * Steps: (1) type-check the library for browsers (DOM library plus
 * `@webgpu/types`, see `scripts/browser_check.json`); (2) bundle with esbuild
 * (its JS API; the service is stopped at the end); (3) import the bundle in a
 * Deno subprocess with the `Deno` global deleted first, and train one step
 * on the cpu backend, which shows that nothing touches Deno-only APIs at
 * import time or in training.
 *
 *   deno task build [--outfile dist/multigrad.js] [--minify] [--no-check] [--no-smoke]
 * @module
 */

import { parseArgs } from "node:util";
// deno-lint-ignore no-import-prefix -- pinned, no root import map
import * as esbuild from "npm:esbuild@0.28.2";

/** The esbuild version the bundle is made with (pinned). */
export const ESBUILD_VERSION = "0.28.2";

const ROOT = new URL("../", import.meta.url);

function rootPath(relative: string): string {
  return decodeURIComponent(new URL(relative, ROOT).pathname);
}

/** Options of {@link build}. */
export interface BuildOptions {
  /** Where the bundle goes (default `dist/multigrad.js` in the repository). */
  outfile?: string;
  /** Minify (default false: a readable bundle with a source map). */
  minify?: boolean;
  /** Type-check for browsers first (default true). */
  check?: boolean;
  /** Import the bundle without `Deno` and train a step (default true). */
  smoke?: boolean;
  /** Progress lines (default console.log). */
  log?: (line: string) => void;
}

/** What {@link build} made. */
export interface BuildResult {
  /** The bundle's path. */
  outfile: string;
  /** Its size in bytes. */
  bytes: number;
  /** Milliseconds the whole build took. */
  ms: number;
}

/** A failed step of the build, with the tool's output. */
export class BuildError extends Error {
  /** An error whose message says which step failed and why. */
  constructor(message: string) {
    super(message);
    this.name = "BuildError";
  }
}

async function runDeno(args: string[], what: string): Promise<string> {
  const output = await new Deno.Command(Deno.execPath(), {
    args,
    cwd: rootPath("./"),
    stdout: "piped",
    stderr: "piped",
    stdin: "null",
    env: { NO_COLOR: "1" },
  }).output();
  const text = new TextDecoder().decode(output.stdout) + new TextDecoder().decode(output.stderr);
  if (!output.success) throw new BuildError(`${what} failed:\n${text.trim()}`);
  return text;
}

/**
 * Type-checks `mod.ts` as a browser sees it: the DOM library and
 * `@webgpu/types` instead of Deno's window and WebGPU declarations.
 */
export async function checkBrowserTypes(): Promise<void> {
  await runDeno(
    [
      "check",
      "--quiet",
      "--config",
      rootPath("scripts/browser_check.json"),
      rootPath("scripts/browser_entry.ts"),
    ],
    "browser type check (deno check with scripts/browser_check.json)",
  );
}

/** Bundles `scripts/browser_entry.ts` into one ES module at `outfile` with esbuild. */
export async function bundle(outfile: string, minify = false): Promise<number> {
  try {
    const result = await esbuild.build({
      entryPoints: [rootPath("scripts/browser_entry.ts")],
      outfile,
      bundle: true,
      format: "esm",
      platform: "browser",
      target: ["es2022", "chrome113", "firefox141", "safari26"],
      minify,
      sourcemap: minify ? false : "linked",
      legalComments: "none",
      logLevel: "silent",
      metafile: true,
      banner: { js: "// multigrad browser bundle (esm); built with esbuild " + ESBUILD_VERSION },
    });
    if (result.errors.length > 0) {
      throw new BuildError(`esbuild failed: ${result.errors.map((e) => e.text).join("; ")}`);
    }
    const inputs = Object.keys(result.metafile?.inputs ?? {});
    const foreign = inputs.filter((p) => /^(npm|jsr|https?):/.test(p));
    if (foreign.length > 0) throw new BuildError(`the bundle pulls in ${foreign.join(", ")}`);
    return (await Deno.stat(outfile)).size;
  } catch (error) {
    if (error instanceof BuildError) throw error;
    const message = error instanceof Error ? error.message : String(error);
    throw new BuildError(`esbuild failed: ${message}`);
  } finally {
    await esbuild.stop();
  }
}

/** The smoke test run on the bundle: no `Deno` global, one DataParallel training step on cpu. */
const SMOKE = `
delete globalThis.Deno;
if (typeof Deno !== "undefined") throw new Error("could not hide Deno");
const mg = await import(BUNDLE);
const devices = await mg.requestDevices({ backend: "cpu", count: 2 });
mg.manualSeed(0);
const model = new mg.nn.Sequential(new mg.nn.Linear(2, 8), new mg.nn.ReLU(), new mg.nn.Linear(8, 3)).to(devices[0]);
const dp = new mg.nn.DataParallel(model, { devices });
const opt = new mg.optim.Adam(model.parameters(), { lr: 0.05 });
const x = mg.randn([16, 2], { device: devices[0] });
const y = mg.tensor(Array.from({ length: 16 }, (_, i) => i % 3), { dtype: "int32", device: devices[0] });
const lossOf = () => mg.nn.functional.crossEntropy(dp.forward(x), y);
const before = await mg.noGrad(lossOf).item();
mg.tidy(() => { opt.zeroGrad(); lossOf().backward(); opt.step(); });
const after = await mg.noGrad(lossOf).item();
const bytes = await mg.toSafetensors(model.stateDict());
model.loadStateDict(mg.fromSafetensors(bytes, { device: devices[0] }));
if (!(after < before)) throw new Error("loss did not decrease: " + before + " -> " + after);
console.log("smoke ok: loss " + before.toFixed(4) + " -> " + after.toFixed(4));
`;

/** Imports the bundle at `outfile` with `Deno` hidden and trains one step; returns its report line. */
export async function smokeTest(outfile: string): Promise<string> {
  const url = new URL(`file://${outfile.startsWith("/") ? "" : Deno.cwd() + "/"}${outfile}`).href;
  const code = `const BUNDLE = ${JSON.stringify(url)};\n${SMOKE}`;
  const text = await runDeno(
    ["eval", "--no-lock", "--ext=js", code],
    "smoke test of the bundle (import without Deno, one training step)",
  );
  return text.trim().split("\n").at(-1) ?? "";
}

/** Type-checks, bundles and smoke-tests; see the module doc. */
export async function build(options: BuildOptions = {}): Promise<BuildResult> {
  const log = options.log ?? console.log;
  const start = performance.now();
  const outfile = options.outfile ?? rootPath("dist/multigrad.js");
  if (options.check ?? true) {
    log("type-checking mod.ts for browsers (DOM + @webgpu/types)...");
    await checkBrowserTypes();
  }
  log(`bundling with esbuild ${ESBUILD_VERSION}...`);
  const bytes = await bundle(outfile, options.minify ?? false);
  log(`wrote ${outfile} (${(bytes / 1024).toFixed(1)} KiB)`);
  if (options.smoke ?? true) log(await smokeTest(outfile));
  return { outfile, bytes, ms: performance.now() - start };
}

if (import.meta.main) {
  try {
    const { values } = parseArgs({
      args: Deno.args,
      strict: true,
      options: {
        outfile: { type: "string" },
        minify: { type: "boolean" },
        "no-check": { type: "boolean" },
        "no-smoke": { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    });
    if (values.help) {
      console.log(
        "Usage: deno task build [--outfile dist/multigrad.js] [--minify] [--no-check] [--no-smoke]",
      );
      Deno.exit(0);
    }
    const result = await build({
      outfile: values.outfile,
      minify: values.minify,
      check: !values["no-check"],
      smoke: !values["no-smoke"],
    });
    console.log(`done in ${(result.ms / 1000).toFixed(1)}s`);
  } catch (error) {
    console.error(`error: ${error instanceof Error ? error.message : String(error)}`);
    Deno.exit(1);
  }
}
