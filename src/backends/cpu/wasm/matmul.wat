;; float32 matmul microkernel for the cpu backend, WebAssembly SIMD (f32x4).
;;
;; Hand-written; assembled by `deno run -A scripts/build_wasm.ts` (wabt's
;; wat2wasm) into `modules.ts`, which holds the bytes as base64 so nobody
;; else needs wabt. The TypeScript side (`../kernels/matmul.ts`) does all the
;; bookkeeping: transposes, batch strides, edge tiles, cache blocking. This
;; module only multiplies packed panels, which it finds in the memory it imports:
;;
;;   A panel (4 rows of A):    [k][4] floats,  16 bytes per k step
;;   B panel (8 columns of B): [k][8] floats,  32 bytes per k step
;;   C:                        row-major, `ldc` bytes per row, 8 columns
;;                             written per panel (the TS side pads C to a
;;                             multiple of 8 columns and 4 rows and copies the
;;                             real m x n out afterwards).
;;
;; Whatever A and B's transposes were, the packing makes every load here
;; contiguous: per k step one 32-byte row of the B panel (two v128 loads) and
;; four A values, each broadcast to all lanes by `v128.load32_splat`.
;;
;; Why a 4x8 tile: x86-64 V8 gives wasm SIMD 16 xmm registers (one of them a
;; scratch register of its own). The tile's 8 accumulators (4 rows x 2
;; vectors) + 2 B vectors + 1 broadcast A value + 1 product temporary = 12
;; live v128 values, so nothing spills. A 6x8 tile would need 16 with the
;; product temporary and spills (measured at half the speed); that tile is
;; `matmul_relaxed.wat`'s, whose fused multiply-add needs no temporary. Per k
;; step: 6 loads, 8 f32x4.mul, 8 f32x4.add (64 flops); the 8 independent
;; accumulator chains hide the add latency. This module uses only the SIMD
;; proposal everyone ships (no relaxed-simd), so it is the fallback where
;; relaxed SIMD is missing (e.g. Safari), and its results are the same on
;; every machine.

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
  ;; For each of `panels` consecutive A panels (4 rows each, starting at byte
  ;; `a`, `16 * k` bytes apart) computes the 4x8 tile
  ;;   C[4 rows][8 cols] = A_panel (4 x k) @ B_panel (k x 8)
  ;; with the single B panel at byte `b`, writing the tile's rows at
  ;; `c`, `c + ldc`, ... and moving `c` down 4 rows per A panel.
  ;;
  ;; Loop order: the B panel (32 * k bytes; 25 KB for k = 784) is reused by
  ;; every A panel, so it stays in L1 while the A panels stream through from
  ;; L2 (the TS side keeps the A block it passes small enough for L2). The
  ;; caller walks the B panels, one call each, which also lets V8 tier this
  ;; function up from its baseline compiler after the first few calls (wasm
  ;; code has no on-stack replacement, so one long call would stay slow).
  ;; Requires k >= 1 and panels >= 1.
  (func (export "panel")
    (param $a i32) (param $b i32) (param $c i32)
    (param $panels i32) (param $k i32) (param $ldc i32)
    (param $flags i32) (param $bias i32)
    (local $bp i32) (local $row i32) (local $bend i32) (local $bpairs i32)
    (local $b0 v128) (local $b1 v128) (local $x v128)
    (local $c00 v128) (local $c01 v128) (local $c10 v128) (local $c11 v128)
    (local $c20 v128) (local $c21 v128) (local $c30 v128) (local $c31 v128)

    ;; The k loops end when the B pointer reaches the end of its panel
    ;; ($bend) or of its even part ($bpairs, for the unrolled loop).
    (local.set $bend (i32.add (local.get $b) (i32.shl (local.get $k) (i32.const 5))))
    (local.set $bpairs (i32.add (local.get $b)
      (i32.shl (i32.and (local.get $k) (i32.const -2)) (i32.const 5))))

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
        ))
      (local.set $bp (local.get $b))

      ;; Two k steps per iteration (rank-1 updates of the 4x8 tile), then at
      ;; most one more for odd k. Unrolling by 2 halves the loop bookkeeping
      ;; (pointer bumps, compare, branch) and measured ~10% faster; the
      ;; second step reuses the same registers, so pressure stays at 12.
      ;; The A pointer runs on from panel to panel (they are contiguous), so
      ;; it needs no reset; the B pointer restarts for each tile.
      (block $pairs_done
        (br_if $pairs_done (i32.ge_u (local.get $bp) (local.get $bpairs)))
        (loop $pairs
          (local.set $b0 (v128.load offset=0 (local.get $bp)))
          (local.set $b1 (v128.load offset=16 (local.get $bp)))

          (local.set $x (v128.load32_splat offset=0 (local.get $a)))
          (local.set $c00
            (f32x4.add (local.get $c00) (f32x4.mul (local.get $x) (local.get $b0))))
          (local.set $c01
            (f32x4.add (local.get $c01) (f32x4.mul (local.get $x) (local.get $b1))))

          (local.set $x (v128.load32_splat offset=4 (local.get $a)))
          (local.set $c10
            (f32x4.add (local.get $c10) (f32x4.mul (local.get $x) (local.get $b0))))
          (local.set $c11
            (f32x4.add (local.get $c11) (f32x4.mul (local.get $x) (local.get $b1))))

          (local.set $x (v128.load32_splat offset=8 (local.get $a)))
          (local.set $c20
            (f32x4.add (local.get $c20) (f32x4.mul (local.get $x) (local.get $b0))))
          (local.set $c21
            (f32x4.add (local.get $c21) (f32x4.mul (local.get $x) (local.get $b1))))

          (local.set $x (v128.load32_splat offset=12 (local.get $a)))
          (local.set $c30
            (f32x4.add (local.get $c30) (f32x4.mul (local.get $x) (local.get $b0))))
          (local.set $c31
            (f32x4.add (local.get $c31) (f32x4.mul (local.get $x) (local.get $b1))))

          (local.set $b0 (v128.load offset=32 (local.get $bp)))
          (local.set $b1 (v128.load offset=48 (local.get $bp)))

          (local.set $x (v128.load32_splat offset=16 (local.get $a)))
          (local.set $c00
            (f32x4.add (local.get $c00) (f32x4.mul (local.get $x) (local.get $b0))))
          (local.set $c01
            (f32x4.add (local.get $c01) (f32x4.mul (local.get $x) (local.get $b1))))

          (local.set $x (v128.load32_splat offset=20 (local.get $a)))
          (local.set $c10
            (f32x4.add (local.get $c10) (f32x4.mul (local.get $x) (local.get $b0))))
          (local.set $c11
            (f32x4.add (local.get $c11) (f32x4.mul (local.get $x) (local.get $b1))))

          (local.set $x (v128.load32_splat offset=24 (local.get $a)))
          (local.set $c20
            (f32x4.add (local.get $c20) (f32x4.mul (local.get $x) (local.get $b0))))
          (local.set $c21
            (f32x4.add (local.get $c21) (f32x4.mul (local.get $x) (local.get $b1))))

          (local.set $x (v128.load32_splat offset=28 (local.get $a)))
          (local.set $c30
            (f32x4.add (local.get $c30) (f32x4.mul (local.get $x) (local.get $b0))))
          (local.set $c31
            (f32x4.add (local.get $c31) (f32x4.mul (local.get $x) (local.get $b1))))

          (local.set $a (i32.add (local.get $a) (i32.const 32)))
          (local.set $bp (i32.add (local.get $bp) (i32.const 64)))
          (br_if $pairs (i32.lt_u (local.get $bp) (local.get $bpairs)))))

      ;; The last k step when k is odd.
      (if (i32.lt_u (local.get $bp) (local.get $bend))
        (then
          (local.set $b0 (v128.load offset=0 (local.get $bp)))
          (local.set $b1 (v128.load offset=16 (local.get $bp)))

          (local.set $x (v128.load32_splat offset=0 (local.get $a)))
          (local.set $c00
            (f32x4.add (local.get $c00) (f32x4.mul (local.get $x) (local.get $b0))))
          (local.set $c01
            (f32x4.add (local.get $c01) (f32x4.mul (local.get $x) (local.get $b1))))

          (local.set $x (v128.load32_splat offset=4 (local.get $a)))
          (local.set $c10
            (f32x4.add (local.get $c10) (f32x4.mul (local.get $x) (local.get $b0))))
          (local.set $c11
            (f32x4.add (local.get $c11) (f32x4.mul (local.get $x) (local.get $b1))))

          (local.set $x (v128.load32_splat offset=8 (local.get $a)))
          (local.set $c20
            (f32x4.add (local.get $c20) (f32x4.mul (local.get $x) (local.get $b0))))
          (local.set $c21
            (f32x4.add (local.get $c21) (f32x4.mul (local.get $x) (local.get $b1))))

          (local.set $x (v128.load32_splat offset=12 (local.get $a)))
          (local.set $c30
            (f32x4.add (local.get $c30) (f32x4.mul (local.get $x) (local.get $b0))))
          (local.set $c31
            (f32x4.add (local.get $c31) (f32x4.mul (local.get $x) (local.get $b1))))

          (local.set $a (i32.add (local.get $a) (i32.const 16)))
          (local.set $bp (i32.add (local.get $bp) (i32.const 32)))))

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
        ))

      ;; Store the tile: 4 rows of 8 floats, `ldc` bytes apart.
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

      (local.set $panels (i32.sub (local.get $panels) (i32.const 1)))
      (br_if $tiles (local.get $panels))))
)
