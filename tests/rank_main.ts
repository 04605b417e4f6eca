/**
 * The entry of a tests' ranks module started by a launcher (mpiexec, or the tcp launcher) as
 * `deno run -A tests/<x>_ranks.ts OUT_PREFIX SCENARIO JSON_OPTIONS`: it joins the process group
 * the launcher set up, runs `main` and writes this rank's result to `OUT_PREFIX.<rank>.json`
 * (what tests/mpiexec.ts reads back).
 * @module
 */

import { distributed } from "../mod.ts";

/** What a ranks module exports: its scenario runner. */
export type RankMain = (
  rank: number,
  worldSize: number,
  scenario: string,
  options: Record<string, unknown>,
) => Promise<unknown>;

/** Runs `main` as this launched rank (see the module comment). */
export async function runAsLaunchedRank(main: RankMain): Promise<void> {
  const [out, scenario, json] = Deno.args;
  await distributed.initProcessGroup({ timeoutMs: 60_000 });
  const rank = distributed.getRank();
  const result = await main(rank, distributed.getWorldSize(), scenario, JSON.parse(json ?? "{}"));
  await Deno.writeTextFile(`${out}.${rank}.json`, JSON.stringify(result));
  await distributed.destroyProcessGroup();
}
