;; float32 matmul microkernel with relaxed-SIMD fused multiply-add: the
;; fast path of the cpu backend where the engine validates relaxed SIMD
;; (V8 / Deno, Chrome). `matmul.wat` is the same kernel without relaxed SIMD
;; (a 4x8 tile, mul + add) and is used where this module does not validate.
;;
;; Hand-written; assembled by `deno run -A scripts/build_wasm.ts` (wabt's
;; wat2wasm --enable-relaxed-simd) into `modules.ts`. The panel format
;; and the calling convention are `matmul.wat`'s, except that A panels hold
;; 6 rows:
;;
;;   A panel (6 rows of A):    [k][6] floats,  24 bytes per k step
;;   B panel (8 columns of B): [k][8] floats,  32 bytes per k step
;;   C:                        row-major, `ldc` bytes per row
;;
;; Why a 6x8 tile: `f32x4.relaxed_madd` (vfmadd231ps on x86 with FMA3)
;; accumulates in place, so no product temporary is needed, and 12
;; accumulators (6 rows x 2 vectors) + 2 B vectors + 1 broadcast A value = 15
;; v128 values fit the 15 xmm registers V8 allocates (the 16th is its
;; scratch register). Per k step: 8 loads for 12 FMAs (96 flops), against 6
;; loads for 8 mul+add pairs in the 4x8 tile; measured ~60 GFLOP/s here
;; against ~48 for `matmul.wat` (Zen 5 core, 128-bit vectors). Wider tiles
;; (8x8, 4x12, 3x16) spill and ran at 25-35. On the Zen 4 guest of
;; 2026-11-23 (peak 16 flops per cycle, ~57 GFLOP/s for independent FMAs)
;; unrolling k by 4 measured 5-10% faster than one step per iteration (the
;; loop bookkeeping and the pointer bumps no longer share the cycles of the
;; 12 FMAs; 2: +5%), so the loop takes four k steps at a time.
;;
;; relaxed_madd may round the product or not depending on the hardware (fused
;; on x86 with FMA3 and on ARM; mul + add elsewhere): results can differ in
;; the last bits between machines, never between runs on one machine.

(module
  ;; The memory comes from the TypeScript side, which grows it when the panels
  ;; need more (up to 1 GiB). It is shared, so that worker threads running
  ;; this module over the same panels split a product between them;
  ;; `scripts/build_wasm.ts` also assembles a copy with an unshared memory
  ;; for engines without shared memory (a browser page that is not
  ;; cross-origin isolated).
  (import "env" "memory" (memory 1 16384 shared))

  ;; panel(a, b, c, panels, k, ldc, flags, bias)
  ;;
  ;; flags bit 0: add to the tile already in C (C += A_panel @ B_panel), for
  ;; the second and later blocks of k: the TS side cuts k into blocks so the
  ;; B panel stays in L1; the sums run in the same order either way, so the
  ;; result is bitwise the unblocked one. flags bit 1: add the 8 floats at
  ;; byte `bias` to every row of the tile before storing it (`addmm`'s bias,
  ;; on the last block of k).
  ;;
  ;; For each of `panels` consecutive A panels (6 rows each, starting at byte
  ;; `a`, `24 * k` bytes apart) computes the 6x8 tile
  ;;   C[6 rows][8 cols] = A_panel (6 x k) @ B_panel (k x 8)
  ;; with the single B panel at byte `b`, writing the tile's rows at
  ;; `c`, `c + ldc`, ... and moving `c` down 6 rows per A panel.
  ;;
  ;; Loop order (as in matmul.wat): the B panel (32 * k bytes) stays in L1
  ;; while the A panels stream from L2; one call per B panel, so that V8
  ;; tiers the function up after the first calls (no on-stack replacement
  ;; for wasm). Requires k >= 1 and panels >= 1.
  (func (export "panel")
    (param $a i32) (param $b i32) (param $c i32)
    (param $panels i32) (param $k i32) (param $ldc i32)
    (param $flags i32) (param $bias i32)
    (local $bp i32) (local $row i32) (local $bend i32) (local $bquads i32)
    (local $b0 v128) (local $b1 v128) (local $x v128)
    (local $c00 v128) (local $c01 v128) (local $c10 v128) (local $c11 v128) (local $c20 v128) (local $c21 v128)
    (local $c30 v128) (local $c31 v128) (local $c40 v128) (local $c41 v128) (local $c50 v128) (local $c51 v128)

    ;; The k loops end when the B pointer reaches the end of its panel
    ;; ($bend) or of its part made of whole groups of four steps ($bquads).
    (local.set $bend (i32.add (local.get $b) (i32.shl (local.get $k) (i32.const 5))))
    (local.set $bquads (i32.add (local.get $b)
      (i32.shl (i32.and (local.get $k) (i32.const -4)) (i32.const 5))))

    (loop $tiles
      (if (i32.and (local.get $flags) (i32.const 1))
        (then
          (local.set $row (local.get $c))
          (local.set $c00 (v128.load (local.get $row)))
          (local.set $c01 (v128.load offset=16 (local.get $row)))
          (local.set $row (i32.add (local.get $row) (local.get $ldc)))
          (local.set $c10 (v128.load (local.get $row)))
          (local.set $c11 (v128.load offset=16 (local.get $row)))
          (local.set $row (i32.add (local.get $row) (local.get $ldc)))
          (local.set $c20 (v128.load (local.get $row)))
          (local.set $c21 (v128.load offset=16 (local.get $row)))
          (local.set $row (i32.add (local.get $row) (local.get $ldc)))
          (local.set $c30 (v128.load (local.get $row)))
          (local.set $c31 (v128.load offset=16 (local.get $row)))
          (local.set $row (i32.add (local.get $row) (local.get $ldc)))
          (local.set $c40 (v128.load (local.get $row)))
          (local.set $c41 (v128.load offset=16 (local.get $row)))
          (local.set $row (i32.add (local.get $row) (local.get $ldc)))
          (local.set $c50 (v128.load (local.get $row)))
          (local.set $c51 (v128.load offset=16 (local.get $row)))
        )
        (else
        (local.set $c00 (v128.const i32x4 0 0 0 0))
        (local.set $c01 (v128.const i32x4 0 0 0 0))
        (local.set $c10 (v128.const i32x4 0 0 0 0))
        (local.set $c11 (v128.const i32x4 0 0 0 0))
        (local.set $c20 (v128.const i32x4 0 0 0 0))
        (local.set $c21 (v128.const i32x4 0 0 0 0))
        (local.set $c30 (v128.const i32x4 0 0 0 0))
        (local.set $c31 (v128.const i32x4 0 0 0 0))
        (local.set $c40 (v128.const i32x4 0 0 0 0))
        (local.set $c41 (v128.const i32x4 0 0 0 0))
        (local.set $c50 (v128.const i32x4 0 0 0 0))
        (local.set $c51 (v128.const i32x4 0 0 0 0))
        ))
      (local.set $bp (local.get $b))

      ;; Four k steps per iteration (rank-1 updates of the 6x8 tile,
      ;; c[i][j] += a[i] * b[j] with a[i] broadcast), then the k % 4 steps
      ;; left one at a time. The A pointer runs on from panel to panel (they
      ;; are contiguous); the B pointer restarts for each tile.
      (block $quads_done
        (br_if $quads_done (i32.ge_u (local.get $bp) (local.get $bquads)))
        (loop $quads
          (local.set $b0 (v128.load offset=0 (local.get $bp)))
          (local.set $b1 (v128.load offset=16 (local.get $bp)))
          (local.set $x (v128.load32_splat offset=0 (local.get $a)))
          (local.set $c00 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c00)))
          (local.set $c01 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c01)))
          (local.set $x (v128.load32_splat offset=4 (local.get $a)))
          (local.set $c10 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c10)))
          (local.set $c11 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c11)))
          (local.set $x (v128.load32_splat offset=8 (local.get $a)))
          (local.set $c20 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c20)))
          (local.set $c21 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c21)))
          (local.set $x (v128.load32_splat offset=12 (local.get $a)))
          (local.set $c30 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c30)))
          (local.set $c31 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c31)))
          (local.set $x (v128.load32_splat offset=16 (local.get $a)))
          (local.set $c40 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c40)))
          (local.set $c41 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c41)))
          (local.set $x (v128.load32_splat offset=20 (local.get $a)))
          (local.set $c50 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c50)))
          (local.set $c51 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c51)))
          (local.set $b0 (v128.load offset=32 (local.get $bp)))
          (local.set $b1 (v128.load offset=48 (local.get $bp)))
          (local.set $x (v128.load32_splat offset=24 (local.get $a)))
          (local.set $c00 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c00)))
          (local.set $c01 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c01)))
          (local.set $x (v128.load32_splat offset=28 (local.get $a)))
          (local.set $c10 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c10)))
          (local.set $c11 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c11)))
          (local.set $x (v128.load32_splat offset=32 (local.get $a)))
          (local.set $c20 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c20)))
          (local.set $c21 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c21)))
          (local.set $x (v128.load32_splat offset=36 (local.get $a)))
          (local.set $c30 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c30)))
          (local.set $c31 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c31)))
          (local.set $x (v128.load32_splat offset=40 (local.get $a)))
          (local.set $c40 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c40)))
          (local.set $c41 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c41)))
          (local.set $x (v128.load32_splat offset=44 (local.get $a)))
          (local.set $c50 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c50)))
          (local.set $c51 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c51)))
          (local.set $b0 (v128.load offset=64 (local.get $bp)))
          (local.set $b1 (v128.load offset=80 (local.get $bp)))
          (local.set $x (v128.load32_splat offset=48 (local.get $a)))
          (local.set $c00 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c00)))
          (local.set $c01 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c01)))
          (local.set $x (v128.load32_splat offset=52 (local.get $a)))
          (local.set $c10 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c10)))
          (local.set $c11 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c11)))
          (local.set $x (v128.load32_splat offset=56 (local.get $a)))
          (local.set $c20 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c20)))
          (local.set $c21 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c21)))
          (local.set $x (v128.load32_splat offset=60 (local.get $a)))
          (local.set $c30 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c30)))
          (local.set $c31 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c31)))
          (local.set $x (v128.load32_splat offset=64 (local.get $a)))
          (local.set $c40 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c40)))
          (local.set $c41 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c41)))
          (local.set $x (v128.load32_splat offset=68 (local.get $a)))
          (local.set $c50 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c50)))
          (local.set $c51 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c51)))
          (local.set $b0 (v128.load offset=96 (local.get $bp)))
          (local.set $b1 (v128.load offset=112 (local.get $bp)))
          (local.set $x (v128.load32_splat offset=72 (local.get $a)))
          (local.set $c00 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c00)))
          (local.set $c01 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c01)))
          (local.set $x (v128.load32_splat offset=76 (local.get $a)))
          (local.set $c10 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c10)))
          (local.set $c11 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c11)))
          (local.set $x (v128.load32_splat offset=80 (local.get $a)))
          (local.set $c20 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c20)))
          (local.set $c21 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c21)))
          (local.set $x (v128.load32_splat offset=84 (local.get $a)))
          (local.set $c30 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c30)))
          (local.set $c31 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c31)))
          (local.set $x (v128.load32_splat offset=88 (local.get $a)))
          (local.set $c40 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c40)))
          (local.set $c41 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c41)))
          (local.set $x (v128.load32_splat offset=92 (local.get $a)))
          (local.set $c50 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c50)))
          (local.set $c51 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c51)))
          (local.set $a (i32.add (local.get $a) (i32.const 96)))
          (local.set $bp (i32.add (local.get $bp) (i32.const 128)))
          (br_if $quads (i32.lt_u (local.get $bp) (local.get $bquads)))))
      (block $steps_done
        (br_if $steps_done (i32.ge_u (local.get $bp) (local.get $bend)))
        (loop $steps
          (local.set $b0 (v128.load offset=0 (local.get $bp)))
          (local.set $b1 (v128.load offset=16 (local.get $bp)))
          (local.set $x (v128.load32_splat offset=0 (local.get $a)))
          (local.set $c00 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c00)))
          (local.set $c01 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c01)))
          (local.set $x (v128.load32_splat offset=4 (local.get $a)))
          (local.set $c10 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c10)))
          (local.set $c11 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c11)))
          (local.set $x (v128.load32_splat offset=8 (local.get $a)))
          (local.set $c20 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c20)))
          (local.set $c21 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c21)))
          (local.set $x (v128.load32_splat offset=12 (local.get $a)))
          (local.set $c30 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c30)))
          (local.set $c31 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c31)))
          (local.set $x (v128.load32_splat offset=16 (local.get $a)))
          (local.set $c40 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c40)))
          (local.set $c41 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c41)))
          (local.set $x (v128.load32_splat offset=20 (local.get $a)))
          (local.set $c50 (f32x4.relaxed_madd (local.get $x) (local.get $b0) (local.get $c50)))
          (local.set $c51 (f32x4.relaxed_madd (local.get $x) (local.get $b1) (local.get $c51)))
          (local.set $a (i32.add (local.get $a) (i32.const 24)))
          (local.set $bp (i32.add (local.get $bp) (i32.const 32)))
          (br_if $steps (i32.lt_u (local.get $bp) (local.get $bend)))))

      ;; The bias row (`addmm`), added once to the finished sums: the same
      ;; rounding as adding it to the product afterwards.
      (if (i32.and (local.get $flags) (i32.const 2))
        (then
          (local.set $b0 (v128.load (local.get $bias)))
          (local.set $b1 (v128.load offset=16 (local.get $bias)))
          (local.set $c00 (f32x4.add (local.get $c00) (local.get $b0)))
          (local.set $c01 (f32x4.add (local.get $c01) (local.get $b1)))
          (local.set $c10 (f32x4.add (local.get $c10) (local.get $b0)))
          (local.set $c11 (f32x4.add (local.get $c11) (local.get $b1)))
          (local.set $c20 (f32x4.add (local.get $c20) (local.get $b0)))
          (local.set $c21 (f32x4.add (local.get $c21) (local.get $b1)))
          (local.set $c30 (f32x4.add (local.get $c30) (local.get $b0)))
          (local.set $c31 (f32x4.add (local.get $c31) (local.get $b1)))
          (local.set $c40 (f32x4.add (local.get $c40) (local.get $b0)))
          (local.set $c41 (f32x4.add (local.get $c41) (local.get $b1)))
          (local.set $c50 (f32x4.add (local.get $c50) (local.get $b0)))
          (local.set $c51 (f32x4.add (local.get $c51) (local.get $b1)))
        ))

      ;; Store the tile: 6 rows of 8 floats, `ldc` bytes apart.
      (v128.store (local.get $c) (local.get $c00))
      (v128.store offset=16 (local.get $c) (local.get $c01))
      (local.set $c (i32.add (local.get $c) (local.get $ldc)))
      (v128.store (local.get $c) (local.get $c10))
      (v128.store offset=16 (local.get $c) (local.get $c11))
      (local.set $c (i32.add (local.get $c) (local.get $ldc)))
      (v128.store (local.get $c) (local.get $c20))
      (v128.store offset=16 (local.get $c) (local.get $c21))
      (local.set $c (i32.add (local.get $c) (local.get $ldc)))
      (v128.store (local.get $c) (local.get $c30))
      (v128.store offset=16 (local.get $c) (local.get $c31))
      (local.set $c (i32.add (local.get $c) (local.get $ldc)))
      (v128.store (local.get $c) (local.get $c40))
      (v128.store offset=16 (local.get $c) (local.get $c41))
      (local.set $c (i32.add (local.get $c) (local.get $ldc)))
      (v128.store (local.get $c) (local.get $c50))
      (v128.store offset=16 (local.get $c) (local.get $c51))
      (local.set $c (i32.add (local.get $c) (local.get $ldc)))

      (local.set $panels (i32.sub (local.get $panels) (i32.const 1)))
      (br_if $tiles (local.get $panels))))
)
