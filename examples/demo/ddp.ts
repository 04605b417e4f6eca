/**
 * A rank of the demo's `--ddp N` mode: started by `distributed.spawn` as a
 * Worker, it trains the demo's model on its own device with
 * DistributedDataParallel; rank 0 reports, checkpoints and plots.
 * @module
 */

import { requestDevices } from "../../mod.ts";
import { pickDevices } from "../_devices.ts";
import { type DemoOptions, runDemo } from "./train.ts";

/** What the launcher passes to every rank (structured-cloned). */
export type DdpRankOptions =
  & Omit<DemoOptions, "devices" | "ddp" | "progress" | "shouldStop" | "log">
  & {
    /** Backend of every rank's device (default: webgpu when there is an adapter, else cpu). */
    backend?: string;
  };

/** What a rank returns. */
export interface DdpRankResult {
  /** This rank's device. */
  device: string;
  /** Epochs completed. */
  epoch: number;
  /** Accuracy on the train split after the last epoch. */
  trainAccuracy: number;
  /** Accuracy on the held-out split after the last epoch. */
  testAccuracy: number;
  /** The checkpoint file (written by rank 0). */
  checkpointPath: string;
  /** The plot (written by rank 0). */
  plotPath: string;
}

/** One rank: its own device, the demo's run as DDP. */
export async function main(
  _rank: number,
  _worldSize: number,
  options: DdpRankOptions,
): Promise<DdpRankResult> {
  const { backend, ...demo } = options;
  const [device] = backend ? await requestDevices({ backend, count: 1 }) : await pickDevices(1);
  const result = await runDemo({ ...demo, devices: [device], ddp: true });
  return {
    device: device.toString(),
    epoch: result.epoch,
    trainAccuracy: result.trainAccuracy,
    testAccuracy: result.testAccuracy,
    checkpointPath: result.checkpointPath,
    plotPath: result.plotPath,
  };
}
