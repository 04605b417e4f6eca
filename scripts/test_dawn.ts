/**
 * `deno task test:dawn`: the conformance suites on the dawn plugin, each test file in a
 * process of its own.
 *
 * Why not one `deno test` over all files: Deno runs the files of one invocation one after
 * another in the same process, tearing down each file's isolate before the next starts.
 * dawn.node (a third-party native addon) and Deno's own WebGPU then live through an isolate
 * teardown with devices alive, which crashed the process (exit 139) between two files on CI's
 * machine, though never here. A process per file leaves process exit as the only teardown, the
 * one `tests/dawn_test.ts` checks ("a program that used it exits by itself").
 *
 * A file whose process ends without Deno's summary line is shown (its last lines) and run once
 * more; if it dies again it counts as one failure. The last line is a summary in Deno's own
 * format ("ok | N passed | M failed") so `.ci/run` counts it like any other run.
 */

const FILES = ["tests/conformance_test.ts", "tests/fused_test.ts", "tests/dawn_test.ts"];
const NOISE = /XDG_RUNTIME_DIR|artificially reduced/;
// deno-lint-ignore no-control-regex -- Deno's colour codes start with ESC
const stripColors = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "");

interface FileRun {
  passed: number;
  failed: number;
  code: number;
  summary: boolean;
  tail: string[];
}

async function runFile(file: string): Promise<FileRun> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["test", "-A", ...Deno.args, file],
    env: { MULTIGRAD_TEST_DAWN: "1" },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const [out, status] = await Promise.all([
    Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text()]),
    child.status,
  ]);
  const lines = (out[0] + out[1]).split("\n").filter((l) => !NOISE.test(l));
  await Deno.stdout.write(new TextEncoder().encode(lines.join("\n") + "\n"));
  const summaryLine = lines.map(stripColors).findLast((l) => /^(ok|FAILED) \| /.test(l));
  const count = (word: string) => {
    const m = summaryLine?.match(new RegExp(`(\\d+) ${word}(?: \\((\\d+) steps?\\))?`));
    return m ? Number(m[1]) + Number(m[2] ?? 0) : 0;
  };
  return {
    passed: count("passed"),
    failed: count("failed"),
    code: status.code,
    summary: summaryLine !== undefined,
    tail: lines.slice(-6),
  };
}

let passed = 0;
let failed = 0;
const problems: string[] = [];
for (const file of FILES) {
  console.log(`== ${file} on dawn (a process of its own)`);
  let run = await runFile(file);
  if (!run.summary) {
    console.log(`${file}: the process ended without a summary (exit ${run.code}); last lines:`);
    console.log(run.tail.join("\n"));
    console.log(`${file}: running it once more`);
    run = await runFile(file);
  }
  if (!run.summary) {
    problems.push(`${file}: died twice without a summary (exit ${run.code})`);
    failed += 1;
    continue;
  }
  passed += run.passed;
  failed += run.failed;
  if (run.code !== 0 && run.failed === 0) {
    // Every test passed but the process did not end cleanly (a crash at exit): a failure.
    problems.push(`${file}: all tests passed, then the process exited with ${run.code}`);
    failed += 1;
  }
}
for (const p of problems) console.log(p);
const ok = failed === 0 && problems.length === 0;
console.log(`${ok ? "ok" : "FAILED"} | ${passed} passed | ${failed} failed`);
Deno.exit(ok ? 0 : 1);
