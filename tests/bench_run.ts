/**
 * Runs `bench/main.ts` in a process of its own for the tests that check
 * what a benchmark run prints and writes: the arguments given, plus
 * `--json` into a temporary file that is read back and removed.
 * @module
 */

/** What one bench process left: its exit code, its output, its JSON report (null if none). */
export interface BenchRun<R> {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
  readonly report: R | null;
}

const MAIN = new URL("../bench/main.ts", import.meta.url);

/** Runs `deno run -A bench/main.ts ...args --json <tmp>`; `R` is the report's shape as the test reads it. */
export async function runBench<R = unknown>(args: readonly string[]): Promise<BenchRun<R>> {
  const dir = await Deno.makeTempDir({ prefix: "multigrad_bench_" });
  try {
    const file = `${dir}/bench.json`;
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", MAIN.pathname, ...args, "--json", file],
      stdout: "piped",
      stderr: "piped",
    }).output();
    let report: R | null = null;
    try {
      report = JSON.parse(await Deno.readTextFile(file)) as R;
    } catch {
      // No report: the exit code and the output say why.
    }
    return {
      code: out.code,
      stdout: new TextDecoder().decode(out.stdout),
      stderr: new TextDecoder().decode(out.stderr),
      report,
    };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
