/**
 * The browser bundle: type-checked for browsers, importable without the
 * `Deno` global, and, in Debian's Chromium driven by playwright-core, able
 * to train a DataParallel step on the cpu backend (and on webgpu where the
 * browser exposes an adapter). Installs nothing: the Chromium tests are
 * skipped when /usr/bin/chromium is missing (`apt-get install -y chromium`).
 * @module
 */

import assert from "node:assert/strict";
// deno-lint-ignore no-import-prefix -- pinned, no root import map
import { chromium } from "npm:playwright-core@1.65.1";
import { bundle, checkBrowserTypes, smokeTest } from "../scripts/build.ts";

const CHROMIUM = "/usr/bin/chromium";
/** The flags the project runs Chromium with (headless, no GPU, no network chatter). */
const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
/**
 * Added for a second try at WebGPU: Chromium blocklists WebGPU on software
 * rendering; this flag lifts that, exposing its SwiftShader fallback adapter.
 */
const UNSAFE_WEBGPU_ARGS = ["--enable-unsafe-webgpu"];

function chromiumMissing(): string | null {
  try {
    return Deno.statSync(CHROMIUM).isFile ? null : `${CHROMIUM} is not a file`;
  } catch {
    return `${CHROMIUM} is missing (apt-get install -y chromium)`;
  }
}

const missing = chromiumMissing();
if (missing) console.warn(`browser tests in Chromium skipped: ${missing}`);

const PAGE_DIR = new URL("./browser/", import.meta.url);
const opts = { sanitizeOps: false, sanitizeResources: false };

/** Builds the bundle once for this file, into a temporary folder. */
let built: Promise<string> | null = null;
function builtBundle(): Promise<string> {
  built ??= (async () => {
    const dir = await Deno.makeTempDir({ prefix: "multigrad_bundle_" });
    globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));
    const outfile = `${dir}/multigrad.js`;
    await bundle(outfile);
    return outfile;
  })();
  return built;
}

Deno.test({
  name: "browser bundle: mod.ts type-checks against the DOM and @webgpu/types",
  ...opts,
  async fn() {
    await checkBrowserTypes();
  },
});

Deno.test({
  name: "browser bundle: imports and trains without the Deno global",
  ...opts,
  async fn() {
    const outfile = await builtBundle();
    const text = await Deno.readTextFile(outfile);
    assert.match(text, /^\/\/ multigrad browser bundle/);
    assert.doesNotMatch(text, /^import .* from "(npm|jsr|node):/m, "self-contained");
    assert.match(await smokeTest(outfile), /^smoke ok: loss /);
  },
});

interface StepReport {
  devices: string[];
  before: number;
  after: number;
  again: number;
  safetensorsBytes: number;
}

function contentType(path: string): string {
  if (path.endsWith(".html")) return "text/html; charset=utf-8";
  if (path.endsWith(".js")) return "text/javascript; charset=utf-8";
  if (path.endsWith(".map")) return "application/json";
  return "application/octet-stream";
}

/** Serves the page and the bundle on 127.0.0.1 (a free port). */
function serve(bundlePath: string): Deno.HttpServer<Deno.NetAddr> {
  const files: Record<string, string> = {
    "/": new URL("index.html", PAGE_DIR).pathname,
    "/index.html": new URL("index.html", PAGE_DIR).pathname,
    "/page.js": new URL("page.js", PAGE_DIR).pathname,
    "/multigrad.js": bundlePath,
    "/multigrad.js.map": `${bundlePath}.map`,
  };
  // Chromium asks for /favicon.ico: answer without a 404 console error.
  const empty = new Set(["/favicon.ico"]);
  return Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (request) => {
    const pathname = new URL(request.url).pathname;
    if (empty.has(pathname)) return new Response(null, { status: 204 });
    const path = files[pathname];
    if (!path) return new Response("not found", { status: 404 });
    try {
      return new Response(await Deno.readFile(path), {
        headers: { "content-type": contentType(path), "cache-control": "no-store" },
      });
    } catch {
      return new Response("not found", { status: 404 });
    }
  });
}

type Browser = Awaited<ReturnType<typeof chromium.launch>>;
type Page = Awaited<ReturnType<Browser["newPage"]>>;

async function openPage(browser: Browser, origin: string, errors: string[]): Promise<Page> {
  const page = await browser.newPage();
  page.on("pageerror", (error) => errors.push(`pageerror: ${error.message}`));
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(`console.error: ${message.text()}`);
  });
  await page.goto(`${origin}/`);
  await page.waitForFunction(() => "multigradTest" in globalThis, null, { timeout: 20_000 });
  return page;
}

function webgpuUnavailable(page: Page): Promise<string | null> {
  return page.evaluate(() =>
    (globalThis as unknown as { multigradTest: { webgpuUnavailable(): Promise<string | null> } })
      .multigradTest.webgpuUnavailable()
  );
}

function trainStep(page: Page, backend: string): Promise<StepReport> {
  return page.evaluate(
    (b) =>
      (globalThis as unknown as {
        multigradTest: { trainStep(backend: string): Promise<StepReport> };
      }).multigradTest.trainStep(b),
    backend,
  );
}

function checkStep(report: StepReport, backend: string): void {
  assert.equal(report.devices.length, 2);
  assert.ok(report.devices[0].startsWith(`${backend}:0: `), report.devices[0]);
  assert.ok(Number.isFinite(report.before) && Number.isFinite(report.after));
  assert.ok(
    report.after < report.before,
    `${backend}: loss did not decrease: ${report.before} -> ${report.after}`,
  );
  assert.ok(Math.abs(report.again - report.after) < 1e-6, "safetensors round trip keeps the model");
  assert.ok(report.safetensorsBytes > 0);
}

Deno.test({
  name: `browser: one training step in Chromium on cpu, and on webgpu when there is an adapter${
    missing ? ` (skipped: ${missing})` : ""
  }`,
  ignore: missing !== null,
  ...opts,
  async fn(t) {
    const bundlePath = await builtBundle();
    const server = serve(bundlePath);
    const origin = `http://127.0.0.1:${server.addr.port}`;
    const errors: string[] = [];
    try {
      const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
      let noAdapter: string | null;
      try {
        const page = await openPage(browser, origin, errors);
        await t.step("cpu backend: DataParallel over cpu:0 and cpu:1, loss decreases", async () => {
          const report = await trainStep(page, "cpu");
          checkStep(report, "cpu");
          console.log(`  cpu: loss ${report.before.toFixed(4)} -> ${report.after.toFixed(4)}`);
        });
        noAdapter = await webgpuUnavailable(page);
        console.log(
          `  webgpu with the default flags: ${
            noAdapter ? `no adapter (${noAdapter})` : "adapter found"
          }`,
        );
        if (!noAdapter) {
          await t.step("webgpu backend (default flags): loss decreases", async () => {
            const report = await trainStep(page, "webgpu");
            checkStep(report, "webgpu");
            console.log(`  webgpu: ${report.devices[0]}; loss ${report.before} -> ${report.after}`);
          });
        }
      } finally {
        await browser.close();
      }
      if (noAdapter) {
        // A second browser with Chromium's software adapter, so the WGSL
        // kernels still run through a browser's WebGPU implementation.
        const soft = await chromium.launch({
          executablePath: CHROMIUM,
          args: [...CHROMIUM_ARGS, ...UNSAFE_WEBGPU_ARGS],
        });
        try {
          const page = await openPage(soft, origin, errors);
          const why = await webgpuUnavailable(page);
          console.log(
            `  webgpu with ${UNSAFE_WEBGPU_ARGS.join(" ")}: ${
              why ? `no adapter (${why})` : "adapter found"
            }`,
          );
          await t.step({
            name:
              "webgpu backend (--enable-unsafe-webgpu): DataParallel over webgpu:0 and webgpu:1, loss decreases",
            ignore: why !== null,
            fn: async () => {
              const report = await trainStep(page, "webgpu");
              checkStep(report, "webgpu");
              console.log(
                `  webgpu: ${report.devices.join("; ")}; loss ${report.before.toFixed(4)} -> ${
                  report.after.toFixed(4)
                }`,
              );
            },
          });
        } finally {
          await soft.close();
        }
      }
      assert.deepEqual(errors, [], "no page errors");
    } finally {
      await server.shutdown();
    }
  },
});
