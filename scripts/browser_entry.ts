/// <reference lib="dom" />
/// <reference types="npm:@webgpu/types@0.1.74" />
/**
 * The browser entry of the bundle (`dist/multigrad.js`): everything `mod.ts`
 * exports. `scripts/build.ts` type-checks it with the DOM library and
 * `@webgpu/types` (see `scripts/browser_check.json`) instead of Deno's
 * window types, so the WebGPU backend is checked against the standard
 * WebGPU declarations browsers implement.
 * @module
 */

export * from "../mod.ts";
