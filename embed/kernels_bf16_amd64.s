//go:build amd64 && !purego

#include "textflag.h"

// The bf16 kernels. Go's assembler has no AVX512_BF16 mnemonics (Go 1.26),
// so VDPBF16PS and VCVTNE2PS2BF16 are written out as their bytes, with the
// Go-syntax form beside each (Intel SDM vol. 2: VDPBF16PS zmm1, zmm2,
// zmm3/m512/m32bcst is EVEX.512.F3.0F38.W0 52 /r; VCVTNE2PS2BF16 zmm1,
// zmm2, zmm3/m512 is EVEX.512.F2.0F38.W0 72 /r). VDPBF16PS adds to each
// fp32 lane c of the destination the two products of lane c's bf16 pair in
// the two sources (odd element first, then even, each rounded to nearest
// even; subnormal inputs read as zero, subnormal results flushed to zero).
//
// Registers in the loop: Z16/Z17 hold the current k-pair of the two
// 16-column panels of a pair; Z18+r holds row r's bf16 pair broadcast
// (VPBROADCASTD: on this AMD Zen 5 the register form ran 0.16 ns per
// VDPBF16PS against 0.20 with the pair as an embedded {1to16} memory
// operand, in BenchmarkBF16Kernel); Z(2r) and Z(2r+1) accumulate row r.
// Rows are R8, R8+DX, R8+2DX, R9, R9+DX, R9+2DX, R10, R10+DX.

// func gemm8x32bf(k int, x *uint32, xstride int, w *uint16, dst *float32, dstride int, bias, res *float32, m int, relu bool)
//
// dst[r*dstride+c] = Σ_i x[r*xstride+i] · w[i][c] + bias[c] (+ res[r*dstride+c])
// (then max(·, 0) if relu) for the first m ≤ 8 rows r of an 8-row tile and
// the 32 columns c of a pair of panels w, [k][2][16][2] bf16 (per k-pair
// the even and odd inputs of columns 0–15, then those of columns 16–31).
// x holds one bf16 pair per uint32; all 8 rows are read. res may be nil.
// The epilogue adds in store16's order, so results match it bit for bit.
TEXT ·gemm8x32bf(SB), NOSPLIT, $0-73
	MOVQ k+0(FP), CX
	MOVQ x+8(FP), R8
	MOVQ xstride+16(FP), DX
	MOVQ w+24(FP), SI
	SHLQ $2, DX
	LEAQ (R8)(DX*2), R9
	ADDQ DX, R9             // row 3
	LEAQ (R9)(DX*2), R10
	ADDQ DX, R10            // row 6
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	TESTQ CX, CX
	JE    epilogue

loop:
	VMOVUPS (SI), Z16
	VMOVUPS 64(SI), Z17
	VPBROADCASTD (R8), Z18
	BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xc2 // VDPBF16PS Z18, Z16, Z0
	BYTE $0x62; BYTE $0xb2; BYTE $0x76; BYTE $0x40; BYTE $0x52; BYTE $0xca // VDPBF16PS Z18, Z17, Z1
	VPBROADCASTD (R8)(DX*1), Z19
	BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xd3 // VDPBF16PS Z19, Z16, Z2
	BYTE $0x62; BYTE $0xb2; BYTE $0x76; BYTE $0x40; BYTE $0x52; BYTE $0xdb // VDPBF16PS Z19, Z17, Z3
	VPBROADCASTD (R8)(DX*2), Z20
	BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xe4 // VDPBF16PS Z20, Z16, Z4
	BYTE $0x62; BYTE $0xb2; BYTE $0x76; BYTE $0x40; BYTE $0x52; BYTE $0xec // VDPBF16PS Z20, Z17, Z5
	VPBROADCASTD (R9), Z21
	BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xf5 // VDPBF16PS Z21, Z16, Z6
	BYTE $0x62; BYTE $0xb2; BYTE $0x76; BYTE $0x40; BYTE $0x52; BYTE $0xfd // VDPBF16PS Z21, Z17, Z7
	VPBROADCASTD (R9)(DX*1), Z22
	BYTE $0x62; BYTE $0x32; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xc6 // VDPBF16PS Z22, Z16, Z8
	BYTE $0x62; BYTE $0x32; BYTE $0x76; BYTE $0x40; BYTE $0x52; BYTE $0xce // VDPBF16PS Z22, Z17, Z9
	VPBROADCASTD (R9)(DX*2), Z23
	BYTE $0x62; BYTE $0x32; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xd7 // VDPBF16PS Z23, Z16, Z10
	BYTE $0x62; BYTE $0x32; BYTE $0x76; BYTE $0x40; BYTE $0x52; BYTE $0xdf // VDPBF16PS Z23, Z17, Z11
	VPBROADCASTD (R10), Z24
	BYTE $0x62; BYTE $0x12; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xe0 // VDPBF16PS Z24, Z16, Z12
	BYTE $0x62; BYTE $0x12; BYTE $0x76; BYTE $0x40; BYTE $0x52; BYTE $0xe8 // VDPBF16PS Z24, Z17, Z13
	VPBROADCASTD (R10)(DX*1), Z25
	BYTE $0x62; BYTE $0x12; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xf1 // VDPBF16PS Z25, Z16, Z14
	BYTE $0x62; BYTE $0x12; BYTE $0x76; BYTE $0x40; BYTE $0x52; BYTE $0xf9 // VDPBF16PS Z25, Z17, Z15
	ADDQ $128, SI
	ADDQ $4, R8
	ADDQ $4, R9
	ADDQ $4, R10
	DECQ CX
	JNZ  loop

epilogue:
	MOVQ    dst+32(FP), R11
	MOVQ    dstride+40(FP), R12
	SHLQ    $2, R12
	MOVQ    bias+48(FP), AX
	VMOVUPS (AX), Z18
	VMOVUPS 64(AX), Z19
	MOVQ    res+56(FP), R13
	MOVQ    m+64(FP), BX
	MOVBLZX relu+72(FP), AX
	VPXORD  Z20, Z20, Z20
	CMPQ    BX, $0
	JLE     done
	VADDPS  Z18, Z0, Z0
	VADDPS  Z19, Z1, Z1
	TESTQ   R13, R13
	JE      nores0
	VADDPS  (R13), Z0, Z0
	VADDPS  64(R13), Z1, Z1
	ADDQ    R12, R13

nores0:
	TESTQ   AX, AX
	JE      store0
	VMAXPS  Z20, Z0, Z0
	VMAXPS  Z20, Z1, Z1

store0:
	VMOVUPS Z0, (R11)
	VMOVUPS Z1, 64(R11)
	ADDQ    R12, R11
	CMPQ    BX, $1
	JLE     done
	VADDPS  Z18, Z2, Z2
	VADDPS  Z19, Z3, Z3
	TESTQ   R13, R13
	JE      nores1
	VADDPS  (R13), Z2, Z2
	VADDPS  64(R13), Z3, Z3
	ADDQ    R12, R13

nores1:
	TESTQ   AX, AX
	JE      store1
	VMAXPS  Z20, Z2, Z2
	VMAXPS  Z20, Z3, Z3

store1:
	VMOVUPS Z2, (R11)
	VMOVUPS Z3, 64(R11)
	ADDQ    R12, R11
	CMPQ    BX, $2
	JLE     done
	VADDPS  Z18, Z4, Z4
	VADDPS  Z19, Z5, Z5
	TESTQ   R13, R13
	JE      nores2
	VADDPS  (R13), Z4, Z4
	VADDPS  64(R13), Z5, Z5
	ADDQ    R12, R13

nores2:
	TESTQ   AX, AX
	JE      store2
	VMAXPS  Z20, Z4, Z4
	VMAXPS  Z20, Z5, Z5

store2:
	VMOVUPS Z4, (R11)
	VMOVUPS Z5, 64(R11)
	ADDQ    R12, R11
	CMPQ    BX, $3
	JLE     done
	VADDPS  Z18, Z6, Z6
	VADDPS  Z19, Z7, Z7
	TESTQ   R13, R13
	JE      nores3
	VADDPS  (R13), Z6, Z6
	VADDPS  64(R13), Z7, Z7
	ADDQ    R12, R13

nores3:
	TESTQ   AX, AX
	JE      store3
	VMAXPS  Z20, Z6, Z6
	VMAXPS  Z20, Z7, Z7

store3:
	VMOVUPS Z6, (R11)
	VMOVUPS Z7, 64(R11)
	ADDQ    R12, R11
	CMPQ    BX, $4
	JLE     done
	VADDPS  Z18, Z8, Z8
	VADDPS  Z19, Z9, Z9
	TESTQ   R13, R13
	JE      nores4
	VADDPS  (R13), Z8, Z8
	VADDPS  64(R13), Z9, Z9
	ADDQ    R12, R13

nores4:
	TESTQ   AX, AX
	JE      store4
	VMAXPS  Z20, Z8, Z8
	VMAXPS  Z20, Z9, Z9

store4:
	VMOVUPS Z8, (R11)
	VMOVUPS Z9, 64(R11)
	ADDQ    R12, R11
	CMPQ    BX, $5
	JLE     done
	VADDPS  Z18, Z10, Z10
	VADDPS  Z19, Z11, Z11
	TESTQ   R13, R13
	JE      nores5
	VADDPS  (R13), Z10, Z10
	VADDPS  64(R13), Z11, Z11
	ADDQ    R12, R13

nores5:
	TESTQ   AX, AX
	JE      store5
	VMAXPS  Z20, Z10, Z10
	VMAXPS  Z20, Z11, Z11

store5:
	VMOVUPS Z10, (R11)
	VMOVUPS Z11, 64(R11)
	ADDQ    R12, R11
	CMPQ    BX, $6
	JLE     done
	VADDPS  Z18, Z12, Z12
	VADDPS  Z19, Z13, Z13
	TESTQ   R13, R13
	JE      nores6
	VADDPS  (R13), Z12, Z12
	VADDPS  64(R13), Z13, Z13
	ADDQ    R12, R13

nores6:
	TESTQ   AX, AX
	JE      store6
	VMAXPS  Z20, Z12, Z12
	VMAXPS  Z20, Z13, Z13

store6:
	VMOVUPS Z12, (R11)
	VMOVUPS Z13, 64(R11)
	ADDQ    R12, R11
	CMPQ    BX, $7
	JLE     done
	VADDPS  Z18, Z14, Z14
	VADDPS  Z19, Z15, Z15
	TESTQ   R13, R13
	JE      nores7
	VADDPS  (R13), Z14, Z14
	VADDPS  64(R13), Z15, Z15
	ADDQ    R12, R13

nores7:
	TESTQ   AX, AX
	JE      store7
	VMAXPS  Z20, Z14, Z14
	VMAXPS  Z20, Z15, Z15

store7:
	VMOVUPS Z14, (R11)
	VMOVUPS Z15, 64(R11)
	ADDQ    R12, R11

done:
	VZEROUPPER
	RET

// func gemm4x32bf(k int, x *uint32, xstride int, w *uint16, dst *float32, dstride int, bias, res *float32, m int, relu bool)
//
// gemm8x32bf for a tile of 4 rows (m ≤ 4), with the same chain of
// VDPBF16PS per element: for the last tile when 4 or fewer rows remain.
TEXT ·gemm4x32bf(SB), NOSPLIT, $0-73
	MOVQ k+0(FP), CX
	MOVQ x+8(FP), R8
	MOVQ xstride+16(FP), DX
	MOVQ w+24(FP), SI
	SHLQ $2, DX
	LEAQ (R8)(DX*2), R9
	ADDQ DX, R9             // row 3
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	TESTQ CX, CX
	JE    epilogue

loop:
	VMOVUPS (SI), Z16
	VMOVUPS 64(SI), Z17
	VPBROADCASTD (R8), Z18
	BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xc2 // VDPBF16PS Z18, Z16, Z0
	BYTE $0x62; BYTE $0xb2; BYTE $0x76; BYTE $0x40; BYTE $0x52; BYTE $0xca // VDPBF16PS Z18, Z17, Z1
	VPBROADCASTD (R8)(DX*1), Z19
	BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xd3 // VDPBF16PS Z19, Z16, Z2
	BYTE $0x62; BYTE $0xb2; BYTE $0x76; BYTE $0x40; BYTE $0x52; BYTE $0xdb // VDPBF16PS Z19, Z17, Z3
	VPBROADCASTD (R8)(DX*2), Z20
	BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xe4 // VDPBF16PS Z20, Z16, Z4
	BYTE $0x62; BYTE $0xb2; BYTE $0x76; BYTE $0x40; BYTE $0x52; BYTE $0xec // VDPBF16PS Z20, Z17, Z5
	VPBROADCASTD (R9), Z21
	BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xf5 // VDPBF16PS Z21, Z16, Z6
	BYTE $0x62; BYTE $0xb2; BYTE $0x76; BYTE $0x40; BYTE $0x52; BYTE $0xfd // VDPBF16PS Z21, Z17, Z7
	ADDQ $128, SI
	ADDQ $4, R8
	ADDQ $4, R9
	DECQ CX
	JNZ  loop

epilogue:
	MOVQ    dst+32(FP), R11
	MOVQ    dstride+40(FP), R12
	SHLQ    $2, R12
	MOVQ    bias+48(FP), AX
	VMOVUPS (AX), Z18
	VMOVUPS 64(AX), Z19
	MOVQ    res+56(FP), R13
	MOVQ    m+64(FP), BX
	MOVBLZX relu+72(FP), AX
	VPXORD  Z20, Z20, Z20
	CMPQ    BX, $0
	JLE     done
	VADDPS  Z18, Z0, Z0
	VADDPS  Z19, Z1, Z1
	TESTQ   R13, R13
	JE      nores0
	VADDPS  (R13), Z0, Z0
	VADDPS  64(R13), Z1, Z1
	ADDQ    R12, R13

nores0:
	TESTQ   AX, AX
	JE      store0
	VMAXPS  Z20, Z0, Z0
	VMAXPS  Z20, Z1, Z1

store0:
	VMOVUPS Z0, (R11)
	VMOVUPS Z1, 64(R11)
	ADDQ    R12, R11
	CMPQ    BX, $1
	JLE     done
	VADDPS  Z18, Z2, Z2
	VADDPS  Z19, Z3, Z3
	TESTQ   R13, R13
	JE      nores1
	VADDPS  (R13), Z2, Z2
	VADDPS  64(R13), Z3, Z3
	ADDQ    R12, R13

nores1:
	TESTQ   AX, AX
	JE      store1
	VMAXPS  Z20, Z2, Z2
	VMAXPS  Z20, Z3, Z3

store1:
	VMOVUPS Z2, (R11)
	VMOVUPS Z3, 64(R11)
	ADDQ    R12, R11
	CMPQ    BX, $2
	JLE     done
	VADDPS  Z18, Z4, Z4
	VADDPS  Z19, Z5, Z5
	TESTQ   R13, R13
	JE      nores2
	VADDPS  (R13), Z4, Z4
	VADDPS  64(R13), Z5, Z5
	ADDQ    R12, R13

nores2:
	TESTQ   AX, AX
	JE      store2
	VMAXPS  Z20, Z4, Z4
	VMAXPS  Z20, Z5, Z5

store2:
	VMOVUPS Z4, (R11)
	VMOVUPS Z5, 64(R11)
	ADDQ    R12, R11
	CMPQ    BX, $3
	JLE     done
	VADDPS  Z18, Z6, Z6
	VADDPS  Z19, Z7, Z7
	TESTQ   R13, R13
	JE      nores3
	VADDPS  (R13), Z6, Z6
	VADDPS  64(R13), Z7, Z7
	ADDQ    R12, R13

nores3:
	TESTQ   AX, AX
	JE      store3
	VMAXPS  Z20, Z6, Z6
	VMAXPS  Z20, Z7, Z7

store3:
	VMOVUPS Z6, (R11)
	VMOVUPS Z7, 64(R11)
	ADDQ    R12, R11

done:
	VZEROUPPER
	RET

// func cvtBF16(dst *uint16, src *float32, n int)
//
// dst[i] = src[i] rounded to bf16 (nearest even; subnormals to zero) for
// i < n, n a multiple of 32: VCVTNE2PS2BF16 takes the low 16 results from
// its memory operand (src[0:16]) and the high 16 from Z1 (src[16:32]).
TEXT ·cvtBF16(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $5, CX
	JE   cdone

cloop:
	VMOVUPS 64(SI), Z1
	BYTE $0x62; BYTE $0xf2; BYTE $0x77; BYTE $0x48; BYTE $0x72; BYTE $0x06 // VCVTNE2PS2BF16 (SI), Z1, Z0
	VMOVUPS Z0, (DI)
	ADDQ    $128, SI
	ADDQ    $64, DI
	DECQ    CX
	JNZ     cloop

cdone:
	VZEROUPPER
	RET
