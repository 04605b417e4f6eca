/**
 * Gives Tensor's methods the composite ops (see `TensorOps` in
 * `../tensor.ts`), beside the core's (`../ops/install.ts`). Imported by
 * `./mod.ts`, so by multigrad's `mod.ts`.
 * @module
 */

import { installTensorMethods, installTensorOps } from "../tensor.ts";
import { TENSOR_METHOD_OPS } from "./tensor_methods.ts";
import * as scatterOps from "./scatter.ts";
import * as dataShape from "./data_shape.ts";
import * as order from "./order.ts";
import * as indexOps from "./index_ops.ts";
import * as rearrange from "./rearrange.ts";
import * as scan from "./scan.ts";
import * as reduce from "./reduce.ts";
import * as elementwise from "./elementwise.ts";
import * as sort from "./sort.ts";
import * as structure from "./structure.ts";
import * as products from "./products.ts";
import * as shapeOps from "./shape_ops.ts";
import * as structureMore from "./structure_more.ts";
import * as stats from "./stats.ts";
import * as statistics from "./statistics.ts";
import * as binary from "./binary.ts";
import * as binaryExtra from "./binary_extra.ts";
import * as logical from "./logical.ts";
import * as unaryMath from "./unary_math.ts";
import * as specialFunctions from "./special_functions.ts";
import * as inplaceVariants from "./inplace_variants.ts";
import * as inplaceRandom from "./inplace_random.ts";
// Only the two that are Tensor methods: the rest of random.ts are factories.
import { bernoulli, multinomial } from "./random.ts";

installTensorOps({
  ...scatterOps,
  ...dataShape,
  ...order,
  ...indexOps,
  ...rearrange,
  ...scan,
  ...reduce,
  ...elementwise,
  ...sort,
  ...structure,
  ...products,
  ...shapeOps,
  ...structureMore,
  ...stats,
  ...statistics,
  ...binary,
  ...binaryExtra,
  ...logical,
  ...unaryMath,
  ...specialFunctions,
  ...inplaceVariants,
  ...inplaceRandom,
  bernoulli,
  multinomial,
});
installTensorMethods(TENSOR_METHOD_OPS);
