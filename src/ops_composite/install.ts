/**
 * Gives Tensor's methods the composite ops (see `TensorOps` in
 * `../tensor.ts`), beside the core's (`../ops/install.ts`). Imported by
 * `./mod.ts`, so by multigrad's `mod.ts`.
 * @module
 */

import { installTensorOps } from "../tensor.ts";
import * as rearrange from "./rearrange.ts";
import * as scan from "./scan.ts";
import * as reduce from "./reduce.ts";
import * as elementwise from "./elementwise.ts";
import * as sort from "./sort.ts";

installTensorOps({ ...rearrange, ...scan, ...reduce, ...elementwise, ...sort });
