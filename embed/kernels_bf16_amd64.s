//go:build amd64 && !purego

#include "textflag.h"

// The bf16 kernels. Go's assembler has no AVX512_BF16 mnemonics (Go 1.26),
// so each VDPBF16PS is written out as its bytes — EVEX.512.F3.0F38.W0 52 /r
// with the EVEX.b bit set, i.e. "vdpbf16ps zmmA, zmmW, dword ptr [row]{1to16}"
// (Intel SDM vol. 2C, VDPBF16PS) — with the Go-syntax form beside it.
// VDPBF16PS zmmA, zmmW, m32bcst adds to each fp32 lane c of zmmA the two
// products of lane c's bf16 pair in zmmW with the broadcast bf16 pair
// (odd element first, then even; denormal inputs read as zero).
//
// Registers: Z16/Z17 hold the current k-pair of the two 16-column panels;
// Z(2r) and Z(2r+1) accumulate row r; rows are R8, R8+DX, R8+2DX, R9,
// R9+DX, R9+2DX, R10, R10+DX.

// func gemm8x32bf(k int, x *uint32, xstride int, w0, w1 *uint16, acc *[256]float32)
//
// acc[r*32+c] = Σ_i x[r][i] · w[i][c] over k bf16 pairs i, for 8 rows and
// the 32 columns of panels w0 (c < 16) and w1 ([k][16][2] bf16 each). x is
// one bf16 pair per uint32, xstride pairs between rows.
TEXT ·gemm8x32bf(SB), NOSPLIT, $0-48
	MOVQ k+0(FP), CX
	MOVQ x+8(FP), R8
	MOVQ xstride+16(FP), DX
	MOVQ w0+24(FP), SI
	MOVQ w1+32(FP), DI
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
	JE    bdone

bloop:
	VMOVUPS (SI), Z16
	VMOVUPS (DI), Z17
	BYTE $0x62; BYTE $0xd2; BYTE $0x7e; BYTE $0x50; BYTE $0x52; BYTE $0x00 // VDPBF16PS.BCST (R8), Z16, Z0
	BYTE $0x62; BYTE $0xd2; BYTE $0x76; BYTE $0x50; BYTE $0x52; BYTE $0x08 // VDPBF16PS.BCST (R8), Z17, Z1
	BYTE $0x62; BYTE $0xd2; BYTE $0x7e; BYTE $0x50; BYTE $0x52; BYTE $0x14; BYTE $0x10 // VDPBF16PS.BCST (R8)(DX*1), Z16, Z2
	BYTE $0x62; BYTE $0xd2; BYTE $0x76; BYTE $0x50; BYTE $0x52; BYTE $0x1c; BYTE $0x10 // VDPBF16PS.BCST (R8)(DX*1), Z17, Z3
	BYTE $0x62; BYTE $0xd2; BYTE $0x7e; BYTE $0x50; BYTE $0x52; BYTE $0x24; BYTE $0x50 // VDPBF16PS.BCST (R8)(DX*2), Z16, Z4
	BYTE $0x62; BYTE $0xd2; BYTE $0x76; BYTE $0x50; BYTE $0x52; BYTE $0x2c; BYTE $0x50 // VDPBF16PS.BCST (R8)(DX*2), Z17, Z5
	BYTE $0x62; BYTE $0xd2; BYTE $0x7e; BYTE $0x50; BYTE $0x52; BYTE $0x31 // VDPBF16PS.BCST (R9), Z16, Z6
	BYTE $0x62; BYTE $0xd2; BYTE $0x76; BYTE $0x50; BYTE $0x52; BYTE $0x39 // VDPBF16PS.BCST (R9), Z17, Z7
	BYTE $0x62; BYTE $0x52; BYTE $0x7e; BYTE $0x50; BYTE $0x52; BYTE $0x04; BYTE $0x11 // VDPBF16PS.BCST (R9)(DX*1), Z16, Z8
	BYTE $0x62; BYTE $0x52; BYTE $0x76; BYTE $0x50; BYTE $0x52; BYTE $0x0c; BYTE $0x11 // VDPBF16PS.BCST (R9)(DX*1), Z17, Z9
	BYTE $0x62; BYTE $0x52; BYTE $0x7e; BYTE $0x50; BYTE $0x52; BYTE $0x14; BYTE $0x51 // VDPBF16PS.BCST (R9)(DX*2), Z16, Z10
	BYTE $0x62; BYTE $0x52; BYTE $0x76; BYTE $0x50; BYTE $0x52; BYTE $0x1c; BYTE $0x51 // VDPBF16PS.BCST (R9)(DX*2), Z17, Z11
	BYTE $0x62; BYTE $0x52; BYTE $0x7e; BYTE $0x50; BYTE $0x52; BYTE $0x22 // VDPBF16PS.BCST (R10), Z16, Z12
	BYTE $0x62; BYTE $0x52; BYTE $0x76; BYTE $0x50; BYTE $0x52; BYTE $0x2a // VDPBF16PS.BCST (R10), Z17, Z13
	BYTE $0x62; BYTE $0x52; BYTE $0x7e; BYTE $0x50; BYTE $0x52; BYTE $0x34; BYTE $0x12 // VDPBF16PS.BCST (R10)(DX*1), Z16, Z14
	BYTE $0x62; BYTE $0x52; BYTE $0x76; BYTE $0x50; BYTE $0x52; BYTE $0x3c; BYTE $0x12 // VDPBF16PS.BCST (R10)(DX*1), Z17, Z15
	ADDQ $64, SI
	ADDQ $64, DI
	ADDQ $4, R8
	ADDQ $4, R9
	ADDQ $4, R10
	DECQ CX
	JNZ  bloop

bdone:
	MOVQ    acc+40(FP), AX
	VMOVUPS Z0, (AX)
	VMOVUPS Z1, 64(AX)
	VMOVUPS Z2, 128(AX)
	VMOVUPS Z3, 192(AX)
	VMOVUPS Z4, 256(AX)
	VMOVUPS Z5, 320(AX)
	VMOVUPS Z6, 384(AX)
	VMOVUPS Z7, 448(AX)
	VMOVUPS Z8, 512(AX)
	VMOVUPS Z9, 576(AX)
	VMOVUPS Z10, 640(AX)
	VMOVUPS Z11, 704(AX)
	VMOVUPS Z12, 768(AX)
	VMOVUPS Z13, 832(AX)
	VMOVUPS Z14, 896(AX)
	VMOVUPS Z15, 960(AX)
	VZEROUPPER
	RET

// func gemm4x32bf(k int, x *uint32, xstride int, w0, w1 *uint16, acc *[256]float32)
//
// gemm8x32bf for 4 rows (acc[128:] untouched), with the same chain of
// VDPBF16PS per element: for the last tile when 4 or fewer rows remain.
TEXT ·gemm4x32bf(SB), NOSPLIT, $0-48
	MOVQ k+0(FP), CX
	MOVQ x+8(FP), R8
	MOVQ xstride+16(FP), DX
	MOVQ w0+24(FP), SI
	MOVQ w1+32(FP), DI
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
	JE    b4done

b4loop:
	VMOVUPS (SI), Z16
	VMOVUPS (DI), Z17
	BYTE $0x62; BYTE $0xd2; BYTE $0x7e; BYTE $0x50; BYTE $0x52; BYTE $0x00 // VDPBF16PS.BCST (R8), Z16, Z0
	BYTE $0x62; BYTE $0xd2; BYTE $0x76; BYTE $0x50; BYTE $0x52; BYTE $0x08 // VDPBF16PS.BCST (R8), Z17, Z1
	BYTE $0x62; BYTE $0xd2; BYTE $0x7e; BYTE $0x50; BYTE $0x52; BYTE $0x14; BYTE $0x10 // VDPBF16PS.BCST (R8)(DX*1), Z16, Z2
	BYTE $0x62; BYTE $0xd2; BYTE $0x76; BYTE $0x50; BYTE $0x52; BYTE $0x1c; BYTE $0x10 // VDPBF16PS.BCST (R8)(DX*1), Z17, Z3
	BYTE $0x62; BYTE $0xd2; BYTE $0x7e; BYTE $0x50; BYTE $0x52; BYTE $0x24; BYTE $0x50 // VDPBF16PS.BCST (R8)(DX*2), Z16, Z4
	BYTE $0x62; BYTE $0xd2; BYTE $0x76; BYTE $0x50; BYTE $0x52; BYTE $0x2c; BYTE $0x50 // VDPBF16PS.BCST (R8)(DX*2), Z17, Z5
	BYTE $0x62; BYTE $0xd2; BYTE $0x7e; BYTE $0x50; BYTE $0x52; BYTE $0x31 // VDPBF16PS.BCST (R9), Z16, Z6
	BYTE $0x62; BYTE $0xd2; BYTE $0x76; BYTE $0x50; BYTE $0x52; BYTE $0x39 // VDPBF16PS.BCST (R9), Z17, Z7
	ADDQ $64, SI
	ADDQ $64, DI
	ADDQ $4, R8
	ADDQ $4, R9
	DECQ CX
	JNZ  b4loop

b4done:
	MOVQ    acc+40(FP), AX
	VMOVUPS Z0, (AX)
	VMOVUPS Z1, 64(AX)
	VMOVUPS Z2, 128(AX)
	VMOVUPS Z3, 192(AX)
	VMOVUPS Z4, 256(AX)
	VMOVUPS Z5, 320(AX)
	VMOVUPS Z6, 384(AX)
	VMOVUPS Z7, 448(AX)
	VZEROUPPER
	RET
