/**
 * `deno run -A scripts/build_wasm.ts`: assembles the cpu backend's
 * hand-written WebAssembly kernels (`src/backends/cpu/wasm/*.wat`) with
 * wabt's `wat2wasm` and regenerates `src/backends/cpu/wasm/modules.ts`,
 * which holds the module bytes as base64 string constants. The generated
 * file is committed, so neither CI nor users need wabt; run this script
 * after editing a `.wat` file (Debian/Ubuntu: `apt-get install wabt`).
 *
 *   deno run -A scripts/build_wasm.ts [--check]
 *
 * `--check` regenerates in memory and exits 1 when the committed file is
 * stale, instead of writing it.
 * @module
 */

const WASM_DIR = new URL("../src/backends/cpu/wasm/", import.meta.url);
const OUTPUT = new URL("modules.ts", WASM_DIR);

/**
 * One module: its source, the wat2wasm flags it needs, the constant it
 * becomes. `unshared` assembles it with the source's shared memory import
 * made unshared (for engines without shared memory).
 */
interface ModuleSpec {
  readonly wat: string;
  readonly flags: readonly string[];
  readonly constant: string;
  readonly doc: string;
  readonly unshared?: boolean;
}

const MODULES: readonly ModuleSpec[] = [
  {
    wat: "matmul.wat",
    flags: ["--enable-threads"],
    constant: "MATMUL_SIMD_WASM",
    doc: "`matmul.wat`: 4x8 f32x4 tile, mul + add (the SIMD proposal only), shared memory.",
  },
  {
    wat: "matmul_relaxed.wat",
    flags: ["--enable-relaxed-simd", "--enable-threads"],
    constant: "MATMUL_RELAXED_WASM",
    doc: "`matmul_relaxed.wat`: 6x8 f32x4 tile, relaxed-SIMD fused multiply-add, shared memory.",
  },
  {
    wat: "pack.wat",
    flags: ["--enable-threads"],
    constant: "PACK_WASM",
    doc: "`pack.wat`: matmul panel packing, f32x4 shuffles, shared memory.",
  },
  {
    wat: "pack.wat",
    flags: [],
    constant: "PACK_UNSHARED_WASM",
    doc: "`pack.wat` with an unshared memory.",
    unshared: true,
  },
  {
    wat: "gelu.wat",
    flags: [],
    constant: "GELU_WASM",
    doc: "`gelu.wat`: float32 GELU and its derivative, f32x4.",
  },
  {
    wat: "elementwise.wat",
    flags: ["--enable-threads"],
    constant: "ELEMENTWISE_WASM",
    doc: "`elementwise.wat`: float32 ReLU, select and binary loops, f32x4, shared memory.",
  },
  {
    wat: "batch_norm.wat",
    flags: ["--enable-threads"],
    constant: "BATCH_NORM_WASM",
    doc: "`batch_norm.wat`: float32 batch norm forward and backward, f64x2 sums, shared memory.",
  },
  {
    wat: "max_pool.wat",
    flags: ["--enable-threads"],
    constant: "MAX_POOL_WASM",
    doc: "`max_pool.wat`: float32 2x2 max pool and the scatter-add of its gradient, shared memory.",
  },
  {
    wat: "adam_sums.wat",
    flags: ["--enable-threads"],
    constant: "ADAM_SUMS_WASM",
    doc: "`adam_sums.wat`: float32 Adam step and column sums, f32x4 / f64x2, shared memory.",
  },
  {
    wat: "reduce.wat",
    flags: ["--enable-threads"],
    constant: "REDUCE_WASM",
    doc: "`reduce.wat`: float32 sums of collectives (all-reduce), f32x4, shared memory.",
  },
  {
    wat: "segment.wat",
    flags: ["--enable-threads"],
    constant: "SEGMENT_WASM",
    doc: "`segment.wat`: float32 bag sums (embeddingBag) and their transpose, f32x4.",
  },
  {
    wat: "matmul.wat",
    flags: [],
    constant: "MATMUL_SIMD_UNSHARED_WASM",
    doc: "`matmul.wat` with an unshared memory.",
    unshared: true,
  },
  {
    wat: "matmul_relaxed.wat",
    flags: ["--enable-relaxed-simd"],
    constant: "MATMUL_RELAXED_UNSHARED_WASM",
    doc: "`matmul_relaxed.wat` with an unshared memory.",
    unshared: true,
  },
];

async function assemble(spec: ModuleSpec, dir: string): Promise<Uint8Array> {
  let input = decodeURIComponent(new URL(spec.wat, WASM_DIR).pathname);
  if (spec.unshared) {
    const text = await Deno.readTextFile(input);
    const unshared = text.replace(/\(memory (\d+) (\d+) shared\)/, "(memory $1 $2)");
    if (unshared === text) throw new Error(`${spec.wat}: no shared memory import to unshare`);
    input = `${dir}/unshared_${spec.wat}`;
    await Deno.writeTextFile(input, unshared);
  }
  const output = `${dir}/${spec.constant}.wasm`;
  let result: Deno.CommandOutput;
  try {
    result = await new Deno.Command("wat2wasm", {
      args: [...spec.flags, input, "-o", output],
      stdout: "piped",
      stderr: "piped",
    }).output();
  } catch (e) {
    throw new Error(`cannot run wat2wasm (install wabt): ${(e as Error).message}`);
  }
  if (!result.success) {
    throw new Error(`wat2wasm ${spec.wat} failed:\n${new TextDecoder().decode(result.stderr)}`);
  }
  const bytes = await Deno.readFile(output);
  if (!WebAssembly.validate(bytes)) throw new Error(`${spec.wat}: this engine rejects the module`);
  return bytes;
}

function encodeBase64(bytes: Uint8Array): string {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

/** Splits a base64 string into lines short enough for `deno fmt`. */
function chunks(text: string, width = 88): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += width) out.push(text.slice(i, i + width));
  return out;
}

async function version(): Promise<string> {
  const result = await new Deno.Command("wat2wasm", { args: ["--version"], stdout: "piped" })
    .output();
  return new TextDecoder().decode(result.stdout).trim();
}

/** The text of `modules.ts` for the current `.wat` sources. */
export async function generate(): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "multigrad_wasm_" });
  try {
    const lines = [
      "// GENERATED by `deno run -A scripts/build_wasm.ts` from the .wat files next to it",
      `// (wabt wat2wasm ${await version()}). Do not edit: edit the .wat files and run`,
      "// the script again.",
      "",
      "/**",
      " * The cpu backend's WebAssembly kernels, as base64 module bytes (see the",
      " * `.wat` sources next to this file).",
      " * @module",
      " */",
    ];
    for (const spec of MODULES) {
      const bytes = await assemble(spec, dir);
      lines.push(
        "",
        `/** ${spec.doc} ${bytes.length} bytes. */`,
        `export const ${spec.constant}: string = [`,
        ...chunks(encodeBase64(bytes)).map((c) => `  "${c}",`),
        `].join("");`,
      );
    }
    return lines.join("\n") + "\n";
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

if (import.meta.main) {
  const text = await generate();
  const path = decodeURIComponent(OUTPUT.pathname);
  if (Deno.args.includes("--check")) {
    const current = await Deno.readTextFile(path).catch(() => "");
    if (current !== text) {
      console.error(`${path} is stale: run deno run -A scripts/build_wasm.ts`);
      Deno.exit(1);
    }
    console.log(`${path} is up to date`);
  } else {
    await Deno.writeTextFile(path, text);
    console.log(`wrote ${path}`);
  }
}
