/**
 * The dawn plugin (`src/backends/dawn/mod.ts`, npm `webgpu`): adapters are
 * listed and named in `Device.info`, devices land on distinct adapters first,
 * CPU adapters behind a GL name get the CPU matmul kernels, and a program
 * that used it exits by itself. Skipped where `npm:webgpu` does not load or
 * Dawn finds no adapter. The ops conformance suite runs on dawn with
 * `MULTIGRAD_TEST_DAWN=1 deno test -A tests/conformance_test.ts`.
 */

import assert from "node:assert/strict";
import { backendNames, requestDevices, tensor, unregisterBackend } from "../mod.ts";
import type { WebGPUDevice } from "../src/backends/webgpu/device.ts";
import type { WrappedDevice } from "../src/backends/backend.ts";
import { runBench } from "./bench_run.ts";

type Plugin = typeof import("../src/backends/dawn/mod.ts");
/** What the bench test reads of the report. */
type Report = {
  errors: unknown[];
  results: { suite: string; backend: string; case: string }[];
};

const PLUGIN_URL = new URL("../src/backends/dawn/mod.ts", import.meta.url);

async function load(): Promise<{ plugin: Plugin | null; why: string }> {
  try {
    // Computed, so that npm:webgpu is fetched only when this file runs.
    const plugin = await import(PLUGIN_URL.href) as Plugin;
    const adapters = await plugin.listDawnAdapters();
    if (adapters.length === 0) return { plugin: null, why: "Dawn found no adapter" };
    return { plugin, why: "" };
  } catch (error) {
    return { plugin: null, why: `npm:webgpu did not load: ${(error as Error).message}` };
  }
}

const { plugin, why } = await load();
if (!plugin) console.warn(`dawn tests skipped: ${why}`);
const ignore = plugin === null;
const opts = { ignore, sanitizeOps: false, sanitizeResources: false };

Deno.test({
  ...opts,
  name: "dawn: adapters listed by name; devices on distinct adapters first; info names them",
  fn: async () => {
    const adapters = await plugin!.listDawnAdapters();
    for (const a of adapters) {
      assert.ok(a.name.length > 0 && a.api.length > 0 && a.sameName >= 1, JSON.stringify(a));
    }
    plugin!.registerDawn({ name: "dawn-test", devicesPerAdapter: 2, priority: -1 });
    try {
      assert.ok(backendNames().includes("dawn-test"));
      const n = adapters.length;
      const devices = await requestDevices({ backend: "dawn-test", count: 2 * n });
      devices.forEach((d, i) => {
        const a = adapters[i % n];
        assert.ok(d.info.startsWith(a.name), `${d}: "${d.info}" should name "${a.name}"`);
        assert.match(d.info, new RegExp(`dawn ${a.api}.*adapter ${(i % n) + 1} of ${n}`));
      });
      // One more than 2 per adapter is refused, naming the adapters.
      await assert.rejects(
        requestDevices({ backend: "dawn-test", count: 2 * n + 1 }),
        (e: Error) =>
          e.message.includes("2 device(s) per adapter") && e.message.includes("dawn-test:"),
      );
      // Devices compute, and two devices of one adapter are independent.
      const x = tensor([[1, 2], [3, 4]], { device: devices[0] });
      const y = x.to(devices[1]).matmul(x.to(devices[1]));
      assert.deepEqual(await y.toArray(), [[7, 10], [15, 22]]);
      // Errors name the device as registered.
      const started = devices[0].backendDevice as WrappedDevice<WebGPUDevice>;
      assert.equal(started.impl.runtime.name, "dawn-test:0");
    } finally {
      unregisterBackend("dawn-test");
    }
  },
});

Deno.test({
  ...opts,
  name: "dawn: a CPU adapter behind a GL name is recognized (register-blocked matmul, not tiled)",
  fn: async () => {
    plugin!.registerDawn({ name: "dawn-cpu" });
    try {
      const [d] = await requestDevices({ backend: "dawn-cpu" });
      const software = /llvmpipe|lavapipe|swiftshader/i.test(d.info);
      assert.equal(
        (d.backendDevice as WrappedDevice<WebGPUDevice>).impl.runtime.isCpuAdapter,
        software,
        d.info,
      );
    } finally {
      unregisterBackend("dawn-cpu");
    }
  },
});

Deno.test({
  ...opts,
  name: "dawn: a program that used it exits by itself, with GPU work still queued",
  fn: async () => {
    const script = `
      import { randn, requestDevices } from ${
      JSON.stringify(new URL("../mod.ts", import.meta.url).href)
    };
      import { registerDawn } from ${JSON.stringify(PLUGIN_URL.href)};
      registerDawn();
      const [d] = await requestDevices({ backend: "dawn" });
      const x = randn([64, 64], { device: d });
      console.log("sum", (await x.matmul(x).sum().item()).toFixed(3) !== "");
      x.matmul(x).matmul(x); // queued and never read
      console.log("end of main");
    `;
    const file = await Deno.makeTempFile({ suffix: ".ts" });
    try {
      await Deno.writeTextFile(file, script);
      const child = new Deno.Command(Deno.execPath(), {
        // The repository's import map resolves the plugin's "webgpu".
        args: ["run", "-A", "--config", new URL("../deno.json", import.meta.url).pathname, file],
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
      const out = await child.output();
      clearTimeout(timer);
      const stdout = new TextDecoder().decode(out.stdout);
      assert.equal(out.signal, null, `killed after 60 s: the process did not exit; ${stdout}`);
      assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
      assert.match(stdout, /sum true\nend of main/);
    } finally {
      await Deno.remove(file);
    }
  },
});

Deno.test({
  ...opts,
  name: "bench --dawn: dawn rows in the matmul suite and DDP ranks on dawn in Workers",
  fn: async () => {
    const out = await runBench<Report>([
      "--quick",
      "--dawn",
      "--backend",
      "dawn",
      "--filter",
      "matmul",
      "--filter",
      "ddp",
    ]);
    assert.equal(out.code, 0, out.stdout + out.stderr.slice(-2000));
    const report = out.report!;
    assert.deepEqual(report.errors, []);
    const cases = report.results.map((r) => `${r.suite} ${r.backend} ${r.case}`);
    assert.ok(cases.includes("matmul dawn 64"), cases.join("; "));
    assert.ok(cases.includes("ddp dawn spawn 2 DDP ranks x 128"), cases.join("; "));
  },
});
