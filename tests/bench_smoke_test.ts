/**
 * Smoke test of `deno task bench`: runs `bench/main.ts --quick --filter
 * matmul --json <tmp>` as a subprocess and checks the exit code and the JSON
 * shape. No timing assertions: speed targets live in the benchmarks only.
 * @module
 */

import assert from "node:assert/strict";
import { runBench } from "./bench_run.ts";

const MAIN = new URL("../bench/main.ts", import.meta.url);

function isRecord(x: unknown): x is Record<string, unknown> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

Deno.test({
  name: "bench: --quick --filter matmul --json writes results",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const { code, stdout: out, stderr: err, report } = await runBench([
      "--quick",
      "--filter",
      "matmul",
    ]);
    assert.equal(code, 0, `bench exited with ${code}\nstdout:\n${out}\nstderr:\n${err}`);
    assert.match(out, /matmul/);
    assert.match(out, /deno \d+\.\d+\.\d+/);

    assert.ok(isRecord(report), "the JSON is an object");
    assert.equal(report.version, 1);
    assert.ok(isRecord(report.meta), "meta is an object");
    assert.equal(report.meta.quick, true);
    assert.deepEqual(report.meta.suites, ["matmul"]);
    assert.equal(typeof report.meta.deno, "string");
    assert.ok(isRecord(report.meta.devices) && "cpu" in report.meta.devices, "cpu started");
    assert.deepEqual(report.errors, []);
    assert.deepEqual(report.peers, []);
    assert.deepEqual(report.comparisons, []);

    assert.ok(Array.isArray(report.results) && report.results.length > 0, "some results");
    const backends = new Set<string>();
    for (const r of report.results as unknown[]) {
      assert.ok(isRecord(r), "a result is an object");
      assert.equal(r.suite, "matmul");
      assert.equal(typeof r.backend, "string");
      assert.equal(typeof r.case, "string");
      assert.ok(
        Number.isInteger(Number(r.case)) && Number(r.case) > 0,
        `case ${r.case} is a size`,
      );
      assert.equal(r.unit, "GFLOP/s");
      assert.ok(typeof r.value === "number" && Number.isFinite(r.value) && r.value > 0);
      assert.ok(typeof r.runs === "number" && r.runs >= 1);
      assert.ok(typeof r.medianMs === "number" && r.medianMs > 0);
      backends.add(r.backend as string);
    }
    assert.ok(backends.has("cpu"), "the cpu backend was measured");
    for (const b of backends) assert.ok(b in (report.meta.devices as Record<string, unknown>));
  },
});

Deno.test({
  name: "bench: --help exits 0 and lists the suites; a bad --filter exits 2",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const help = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", MAIN.href, "--help"],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(help.code, 0);
    const text = new TextDecoder().decode(help.stdout);
    for (const suite of ["matmul", "elementwise", "mlp", "dataparallel", "memory"]) {
      assert.match(text, new RegExp(suite));
    }
    const bad = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", MAIN.href, "--filter", "no-such-suite"],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(bad.code, 2);
    assert.match(new TextDecoder().decode(bad.stderr), /matches no suite/);
  },
});
