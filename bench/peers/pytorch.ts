/**
 * PyTorch peer: `bench/pytorch_mlp.py --serve` (or another script's server,
 * e.g. `bench/cnn_torch.py --serve` for the CNN epoch) in a child process (Debian's
 * `/usr/bin/python3` with `python3-torch`, its OpenBLAS environment
 * overrides removed), asked for one timed run at a time so that PyTorch and
 * multigrad are measured round-robin under the same machine load. PyTorch
 * times each run itself (no IPC in the number). PyTorch keeps its own
 * default thread count (`torch.get_num_threads()`, shown in the info line).
 *
 * @module
 */

/** What {@link startPytorch} gives: one-run timers per case, and a stop. */
export interface PytorchPeer {
  /** `torch 1.13.0, 2 threads`. */
  readonly info: string;
  /**
   * One timed run of `case` (`"matmul"`, `"mlp"`, `"demo"`; `"epoch"` for
   * the CNN script; the case names of `bench/embedding_ctc_torch.py`):
   * PyTorch's own milliseconds.
   */
  run(name: string): Promise<number>;
  /** The processor milliseconds of the last run, where the script reports them (else NaN). */
  lastCpuMs(): number;
  /** Ends the child process. */
  close(): Promise<void>;
}

const SCRIPT = new URL("../pytorch_mlp.py", import.meta.url);

/** The CNN epoch's server: `bench/cnn_torch.py --serve <training images>`. */
export const CNN_SCRIPT: URL = new URL("../cnn_torch.py", import.meta.url);

/**
 * Starts the PyTorch server (`script` with `--serve` and `args`), or
 * resolves with why it cannot run here (no python3, no torch).
 */
export async function startPytorch(
  python = "/usr/bin/python3",
  script: URL = SCRIPT,
  args: readonly string[] = [],
): Promise<PytorchPeer | string> {
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command("env", {
      // The OpenBLAS variables some environments set slow the threaded BLAS down.
      args: [
        "-u",
        "OPENBLAS_CORETYPE",
        "-u",
        "OPENBLAS_L2_SIZE",
        python,
        decodeURIComponent(script.pathname),
        "--serve",
        ...args,
      ],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  } catch (error) {
    return `cannot start ${python}: ${(error as Error).message}`;
  }
  const writer = child.stdin.getWriter();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  const encoder = new TextEncoder();
  const ask = async (command: object): Promise<Record<string, unknown>> => {
    await writer.write(encoder.encode(JSON.stringify(command) + "\n"));
    while (!buffered.includes("\n")) {
      const { value, done } = await lines.read();
      if (done) {
        const err = await new Response(child.stderr).text().catch(() => "");
        throw new Error(
          `${script.pathname.split("/").pop()} exited: ${
            err.trim().split("\n").slice(-3).join(" / ")
          }`,
        );
      }
      buffered += value;
    }
    const at = buffered.indexOf("\n");
    const line = buffered.slice(0, at);
    buffered = buffered.slice(at + 1);
    return JSON.parse(line);
  };
  const close = async () => {
    await writer.close().catch(() => {});
    await child.status;
    await child.stderr.cancel().catch(() => {});
    await lines.cancel().catch(() => {});
  };
  let cpuMs = NaN;
  try {
    const info = await ask({ info: true });
    return {
      info: `torch ${info.torch}, ${info.threads} thread${info.threads === 1 ? "" : "s"}`,
      run: async (name) => {
        const answer = await ask({ case: name });
        cpuMs = answer.cpu_ms === undefined ? NaN : Number(answer.cpu_ms);
        return Number(answer.ms);
      },
      lastCpuMs: () => cpuMs,
      close,
    };
  } catch (error) {
    await close().catch(() => {});
    return (error as Error).message;
  }
}
