/**
 * The bootstrap of a rank started by `spawn`: joins the process group,
 * imports the user's module, runs its `main(rank, worldSize, ...args)` and
 * posts the outcome. Runs inside the rank's Worker.
 * @module
 */

import { DistributedError } from "./backend.ts";
import { destroyProcessGroup, initProcessGroup, isInitialized } from "./group.ts";
import { type LocalShared, markRank, RankStatus, setLocalLaunch } from "./local.ts";

/** What the launcher posts to a rank's Worker. */
export interface RankLaunch {
  /** The module whose `main` the rank runs. */
  readonly moduleUrl: string;
  /** This rank. */
  readonly rank: number;
  /** Number of ranks. */
  readonly worldSize: number;
  /** Extra arguments of `main`. */
  readonly args: readonly unknown[];
  /** Process-group backend name. */
  readonly backend: string;
  /** Collective timeout. */
  readonly timeoutMs: number;
  /** The local group's shared memory (backend `"local"` only). */
  readonly shared: LocalShared | null;
  /** `"local"` only: this rank's end of the channel to each rank (null for itself). */
  readonly ports: readonly (MessagePort | null)[] | null;
}

/** What a rank's Worker posts back. */
export type RankOutcome =
  | { readonly kind: "done"; readonly value: unknown }
  | {
    readonly kind: "failed";
    readonly error: { readonly name: string; readonly message: string; readonly stack?: string };
    /** The ranks a DistributedError blamed. */
    readonly ranks: readonly number[];
  };

interface WorkerScope {
  onmessage: ((event: MessageEvent<RankLaunch>) => void) | null;
  postMessage(message: RankOutcome): void;
  close(): void;
}

const scope = globalThis as unknown as WorkerScope;

function describe(error: unknown): { name: string; message: string; stack?: string } {
  if (error instanceof Error) {
    return { name: error.name, message: error.message, stack: error.stack };
  }
  return { name: "Error", message: String(error) };
}

async function run(launch: RankLaunch): Promise<void> {
  const { rank, worldSize, shared } = launch;
  let reported = false;
  const report = (outcome: RankOutcome) => {
    if (reported) return;
    reported = true;
    if (outcome.kind === "failed" && shared) {
      markRank(shared, rank, RankStatus.Failed, outcome.error.message);
    }
    scope.postMessage(outcome);
  };
  const failed = (error: unknown) =>
    report({
      kind: "failed",
      error: describe(error),
      ranks: error instanceof DistributedError ? [...error.ranks] : [],
    });
  // A rank that ends its Worker itself must still be reported, or the
  // launcher (and the other ranks) would wait for it.
  const close = scope.close.bind(scope);
  scope.close = () => {
    failed(new Error("the rank closed its Worker (self.close()) before main returned"));
    close();
  };
  const exit = Deno.exit;
  Deno.exit = (code?: number): never => {
    failed(new Error(`the rank called Deno.exit(${code ?? ""}) before main returned`));
    return exit(code);
  };
  try {
    if (shared) setLocalLaunch(shared, rank, launch.ports ?? []);
    await initProcessGroup({
      backend: launch.backend,
      rank,
      worldSize,
      timeoutMs: launch.timeoutMs,
    });
    const module = await import(launch.moduleUrl);
    if (typeof module.main !== "function") {
      throw new TypeError(
        `spawn: ${launch.moduleUrl} exports no function main(rank, worldSize, ...args)`,
      );
    }
    const value = await module.main(rank, worldSize, ...launch.args);
    if (isInitialized()) await destroyProcessGroup();
    try {
      report({ kind: "done", value });
    } catch (error) {
      reported = false;
      throw new TypeError(
        `main's return value cannot be sent to the launcher (structured clone): ${
          (error as Error).message
        }`,
      );
    }
  } catch (error) {
    failed(error);
  }
  // The rank ends its own Worker once it has reported: a Worker terminated
  // from outside while it holds a GPUDevice crashed (exit 139) or hung the
  // whole process at exit on NVIDIA's Vulkan driver; one that closes itself
  // exits cleanly. The launcher terminates only ranks that never reported.
  close();
}

scope.onmessage = (event) => {
  scope.onmessage = null;
  run(event.data);
};
