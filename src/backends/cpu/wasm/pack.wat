;; Panel packing for the cpu backend's float32 matmul, in WebAssembly SIMD:
;; the TypeScript side copies an operand into the kernel's memory as it is
;; stored (one memcpy) and these functions lay its rows out as the kernel
;; reads them, `width` rows per panel, each panel [cols][width]
;; (see `matmul.wat`). Assembled by `deno run -A scripts/build_wasm.ts`; it
;; imports the kernel modules' memory (shared, with an unshared copy built).
;;
;; Only whole panels are packed here (widths 4, 6 and 8); the TypeScript
;; side packs a last, partial panel itself, padding it with zeros.

(module
  (import "env" "memory" (memory 1 16384 shared))

  ;; pack_rows(src, ld, dst, panels, width, cols)
  ;;
  ;; The source is row-major: row r starts at byte `src + r * ld`. Panel p
  ;; takes rows p*width .. p*width + width - 1 and is written from
  ;; `dst + p * width * cols * 4`. A transpose: four rows at a time, four
  ;; columns at a time, with shuffles (4x4 blocks), then the columns that do
  ;; not fill a block of four, and for width 6 the last two rows, one value at
  ;; a time.
  (func (export "pack_rows")
    (param $src i32) (param $ld i32) (param $dst i32)
    (param $panels i32) (param $width i32) (param $cols i32)
    (local $p i32) (local $g i32) (local $c i32) (local $r i32) (local $cols4 i32)
    (local $row i32) (local $out i32) (local $step i32) (local $panel i32)
    (local $r0 v128) (local $r1 v128) (local $r2 v128) (local $r3 v128)
    (local $lo01 v128) (local $lo23 v128) (local $hi01 v128) (local $hi23 v128)
    (local.set $cols4 (i32.and (local.get $cols) (i32.const -4)))
    ;; Bytes from one column of a panel to the next.
    (local.set $step (i32.shl (local.get $width) (i32.const 2)))
    (local.set $p (i32.const 0))
    (block $done
      (loop $panels_loop
        (br_if $done (i32.ge_u (local.get $p) (local.get $panels)))
        (local.set $panel (i32.add (local.get $dst)
          (i32.mul (local.get $p) (i32.mul (local.get $step) (local.get $cols)))))
        ;; Groups of four rows: g = 0 (and 4 for width 8).
        (local.set $g (i32.const 0))
        (block $groups_done
          (loop $groups
            (br_if $groups_done
              (i32.gt_u (i32.add (local.get $g) (i32.const 4)) (local.get $width)))
            ;; Address of row (p*width + g), column 0.
            (local.set $row (i32.add (local.get $src)
              (i32.mul (i32.add (i32.mul (local.get $p) (local.get $width)) (local.get $g))
                (local.get $ld))))
            (local.set $out (i32.add (local.get $panel) (i32.shl (local.get $g) (i32.const 2))))
            (local.set $c (i32.const 0))
            (block $blocks_done
              (loop $blocks
                (br_if $blocks_done (i32.ge_u (local.get $c) (local.get $cols4)))
                (local.set $r0 (v128.load (local.get $row)))
                (local.set $r1 (v128.load (i32.add (local.get $row) (local.get $ld))))
                (local.set $r2 (v128.load (i32.add (local.get $row) (i32.shl (local.get $ld) (i32.const 1)))))
                (local.set $r3 (v128.load (i32.add (local.get $row) (i32.mul (local.get $ld) (i32.const 3)))))
                ;; [r0.0 r1.0 r0.1 r1.1], [r2.0 r3.0 r2.1 r3.1], then the .2/.3 halves
                (local.set $lo01 (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23
                  (local.get $r0) (local.get $r1)))
                (local.set $lo23 (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23
                  (local.get $r2) (local.get $r3)))
                (local.set $hi01 (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31
                  (local.get $r0) (local.get $r1)))
                (local.set $hi23 (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31
                  (local.get $r2) (local.get $r3)))
                ;; Column c: [r0.0 r1.0 r2.0 r3.0], and so on for c+1, c+2, c+3.
                (v128.store (local.get $out)
                  (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23
                    (local.get $lo01) (local.get $lo23)))
                (v128.store (i32.add (local.get $out) (local.get $step))
                  (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31
                    (local.get $lo01) (local.get $lo23)))
                (v128.store (i32.add (local.get $out) (i32.shl (local.get $step) (i32.const 1)))
                  (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23
                    (local.get $hi01) (local.get $hi23)))
                (v128.store (i32.add (local.get $out) (i32.mul (local.get $step) (i32.const 3)))
                  (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31
                    (local.get $hi01) (local.get $hi23)))
                (local.set $row (i32.add (local.get $row) (i32.const 16)))
                (local.set $out (i32.add (local.get $out) (i32.shl (local.get $step) (i32.const 2))))
                (local.set $c (i32.add (local.get $c) (i32.const 4)))
                (br $blocks)))
            ;; The columns past the last block of four.
            (block $tail_done
              (loop $tail
                (br_if $tail_done (i32.ge_u (local.get $c) (local.get $cols)))
                (f32.store (local.get $out) (f32.load (local.get $row)))
                (f32.store offset=4 (local.get $out)
                  (f32.load (i32.add (local.get $row) (local.get $ld))))
                (f32.store offset=8 (local.get $out)
                  (f32.load (i32.add (local.get $row) (i32.shl (local.get $ld) (i32.const 1)))))
                (f32.store offset=12 (local.get $out)
                  (f32.load (i32.add (local.get $row) (i32.mul (local.get $ld) (i32.const 3)))))
                (local.set $row (i32.add (local.get $row) (i32.const 4)))
                (local.set $out (i32.add (local.get $out) (local.get $step)))
                (local.set $c (i32.add (local.get $c) (i32.const 1)))
                (br $tail)))
            (local.set $g (i32.add (local.get $g) (i32.const 4)))
            (br $groups)))
        ;; Rows past the groups of four (width 6: rows 4 and 5), one value at a time.
        (local.set $r (local.get $g))
        (block $rest_done
          (loop $rest
            (br_if $rest_done (i32.ge_u (local.get $r) (local.get $width)))
            (local.set $row (i32.add (local.get $src)
              (i32.mul (i32.add (i32.mul (local.get $p) (local.get $width)) (local.get $r))
                (local.get $ld))))
            (local.set $out (i32.add (local.get $panel) (i32.shl (local.get $r) (i32.const 2))))
            (local.set $c (i32.const 0))
            (block $cols_done
              (loop $cols_loop
                (br_if $cols_done (i32.ge_u (local.get $c) (local.get $cols)))
                (f32.store (local.get $out) (f32.load (local.get $row)))
                (local.set $row (i32.add (local.get $row) (i32.const 4)))
                (local.set $out (i32.add (local.get $out) (local.get $step)))
                (local.set $c (i32.add (local.get $c) (i32.const 1)))
                (br $cols_loop)))
            (local.set $r (i32.add (local.get $r) (i32.const 1)))
            (br $rest)))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $panels_loop))))

  ;; pack_cols(src, ld, dst, panels, width, cols)
  ;;
  ;; The source is stored transposed: column c of the logical matrix starts
  ;; at byte `src + c * ld` and its rows are contiguous, so each panel column
  ;; is `width` contiguous floats: copies of 16 (+ 8) bytes.
  (func (export "pack_cols")
    (param $src i32) (param $ld i32) (param $dst i32)
    (param $panels i32) (param $width i32) (param $cols i32)
    (local $p i32) (local $c i32) (local $from i32) (local $out i32)
    (local.set $out (local.get $dst))
    (local.set $p (i32.const 0))
    (block $done
      (loop $panels_loop
        (br_if $done (i32.ge_u (local.get $p) (local.get $panels)))
        (local.set $from (i32.add (local.get $src)
          (i32.shl (i32.mul (local.get $p) (local.get $width)) (i32.const 2))))
        (local.set $c (i32.const 0))
        (block $cols_done
          (loop $cols_loop
            (br_if $cols_done (i32.ge_u (local.get $c) (local.get $cols)))
            (v128.store (local.get $out) (v128.load (local.get $from)))
            (if (i32.eq (local.get $width) (i32.const 8))
              (then (v128.store offset=16 (local.get $out) (v128.load offset=16 (local.get $from)))))
            (if (i32.eq (local.get $width) (i32.const 6))
              (then (i64.store offset=16 (local.get $out) (i64.load offset=16 (local.get $from)))))
            (local.set $from (i32.add (local.get $from) (local.get $ld)))
            (local.set $out (i32.add (local.get $out) (i32.shl (local.get $width) (i32.const 2))))
            (local.set $c (i32.add (local.get $c) (i32.const 1)))
            (br $cols_loop)))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $panels_loop))))

  ;; copy_rows(src, ld, dst, ldd, bytes, rows): `rows` rows of `bytes` from
  ;; `src` (rows `ld` bytes apart) to `dst` (rows `ldd` apart), for a
  ;; product's C copied out to an output in this memory. A typed array's
  ;; `set` between two views of one shared memory ran 5-10x slower.
  (func (export "copy_rows")
    (param $src i32) (param $ld i32) (param $dst i32) (param $ldd i32)
    (param $bytes i32) (param $rows i32)
    (block $done
      (loop $rows_loop
        (br_if $done (i32.eqz (local.get $rows)))
        (memory.copy (local.get $dst) (local.get $src) (local.get $bytes))
        (local.set $src (i32.add (local.get $src) (local.get $ld)))
        (local.set $dst (i32.add (local.get $dst) (local.get $ldd)))
        (local.set $rows (i32.sub (local.get $rows) (i32.const 1)))
        (br $rows_loop))))

  ;; pack_partial(src, dr, dc, live, width, panel, dst): one panel of `live`
  ;; rows (fewer than `panel`: the last, partial one) and `width` columns,
  ;; element (r, c) at byte `src + r * dr + c * dc`, laid out [width][panel]
  ;; from `dst` with rows `live ..` zero. The TypeScript loop it replaces
  ;; took ~1.4 ms of the example CNN's step (per-image products, each with
  ;; its own partial panels).
  (func (export "pack_partial")
    (param $src i32) (param $dr i32) (param $dc i32) (param $live i32)
    (param $width i32) (param $panel i32) (param $dst i32)
    (local $c i32) (local $w i32) (local $s i32)
    (block $done
      (loop $cols
        (br_if $done (i32.ge_u (local.get $c) (local.get $width)))
        (local.set $s (local.get $src))
        (local.set $w (i32.const 0))
        (block $rows_done
          (loop $rows
            (br_if $rows_done (i32.ge_u (local.get $w) (local.get $live)))
            (i32.store (local.get $dst) (i32.load (local.get $s)))
            (local.set $s (i32.add (local.get $s) (local.get $dr)))
            (local.set $dst (i32.add (local.get $dst) (i32.const 4)))
            (local.set $w (i32.add (local.get $w) (i32.const 1)))
            (br $rows)))
        (block $zeros_done
          (loop $zeros
            (br_if $zeros_done (i32.ge_u (local.get $w) (local.get $panel)))
            (i32.store (local.get $dst) (i32.const 0))
            (local.set $dst (i32.add (local.get $dst) (i32.const 4)))
            (local.set $w (i32.add (local.get $w) (i32.const 1)))
            (br $zeros)))
        (local.set $src (i32.add (local.get $src) (local.get $dc)))
        (local.set $c (i32.add (local.get $c) (i32.const 1)))
        (br $cols))))
)
