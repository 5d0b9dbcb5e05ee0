package cache

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// SharedPartition is the partition of every request when the cache is shared
// by all clients (an empty partition_by).
const SharedPartition = "shared"

// MinSecretLen is the shortest partition secret NewPartitioner accepts.
const MinSecretLen = 16

// SecretFile is the file, inside the data folder, that LoadOrCreateSecret keeps
// the generated partition secret in.
const SecretFile = "partition.key"

// Partition selectors accepted by NewPartitioner; "header:<Name>" selects any
// other header.
const (
	ByAuthorization = "authorization"
	ByNamespace     = "namespace"
	byHeaderPrefix  = "header:"
)

// NamespaceHeader adds to the partition when "namespace" is selected.
const NamespaceHeader = "X-Breakwater-Namespace"

// Partitioner turns request headers into the partition that decides who may
// share cache entries. It is safe for concurrent use.
type Partitioner struct {
	secret []byte
	// headers are the canonical header names, in the order given.
	headers []string
	// authIdx is the index of Authorization in headers, or -1.
	authIdx int
	memo    partitionMemo
}

// NewPartitioner returns a partitioner that separates tenants by the values
// named in by: "authorization" (the Authorization header), "namespace" (the
// X-Breakwater-Namespace header) and "header:<Name>" (any header). Values are
// combined with HMAC-SHA256 under secret, so partitions do not reveal keys.
// An empty by is the explicit opt-in to one cache shared by every client.
func NewPartitioner(secret []byte, by []string) (*Partitioner, error) {
	p := &Partitioner{authIdx: -1}
	if len(by) == 0 {
		return p, nil
	}
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("create partitioner: secret has %d bytes, need at least %d", len(secret), MinSecretLen)
	}
	if err := ValidatePartitionBy(by); err != nil {
		return nil, fmt.Errorf("create partitioner: %w", err)
	}
	p.secret = append([]byte(nil), secret...)
	for _, sel := range by {
		name, _ := partitionHeader(sel)
		if name == "Authorization" {
			p.authIdx = len(p.headers)
		}
		p.headers = append(p.headers, name)
	}
	return p, nil
}

// Partition returns the partition of a request with headers h: "shared" in
// shared mode, else the hex HMAC-SHA256 over the selected header values. Each
// value is length-prefixed, so "a"+"bc" and "ab"+"c" differ, and an absent
// header differs from an empty one. The "authorization" selector reads the
// client's key wherever it was sent (see credential). A request without a
// key, when "authorization" is selected, falls into one fixed anonymous
// partition (per value of the other selectors), distinct from every keyed
// tenant.
func (p *Partitioner) Partition(h http.Header) string {
	if len(p.headers) == 0 {
		return SharedPartition
	}
	// The MAC's input is built first: a repeated input (the same key and
	// selectors, which is every request of a tenant) is answered from the
	// memo without computing the HMAC again.
	var stack [256]byte
	in := append(stack[:0], "breakwater-partition-v1"...)
	for i, name := range p.headers {
		vals := h.Values(name)
		if i == p.authIdx {
			vals = credential(h)
		}
		in = binary.BigEndian.AppendUint64(in, uint64(len(name)))
		in = append(in, name...)
		if vals == nil {
			// Absent: a marker no present value can produce.
			in = append(in, 0)
			continue
		}
		in = append(in, 1)
		in = binary.BigEndian.AppendUint64(in, uint64(len(vals)))
		for _, v := range vals {
			in = binary.BigEndian.AppendUint64(in, uint64(len(v)))
			in = append(in, v...)
		}
	}
	if part, ok := p.memo.get(in); ok {
		return part
	}
	mac := hmac.New(sha256.New, p.secret)
	mac.Write(in)
	part := hex.EncodeToString(mac.Sum(nil))
	p.memo.put(in, part)
	return part
}

// partitionMemo maps a partition's MAC input to the partition. The input is
// the key itself, compared whole, so two tenants can never share an entry
// (no digest of it stands in). It holds at most partitionMemoEntries inputs
// of at most partitionMemoInput bytes each (it is emptied when full), so it
// is bounded at about 2 MiB; the credentials in it are the ones the process
// already receives on every request of those tenants.
type partitionMemo struct {
	mu sync.RWMutex
	m  map[string]string
}

const (
	partitionMemoEntries = 4096
	partitionMemoInput   = 512
)

func (m *partitionMemo) get(in []byte) (string, bool) {
	m.mu.RLock()
	part, ok := m.m[string(in)] // no allocation: the compiler looks up the bytes
	m.mu.RUnlock()
	return part, ok
}

func (m *partitionMemo) put(in []byte, part string) {
	if len(in) > partitionMemoInput {
		return
	}
	m.mu.Lock()
	if m.m == nil || len(m.m) >= partitionMemoEntries {
		m.m = make(map[string]string, 64)
	}
	m.m[string(in)] = part
	m.mu.Unlock()
}

// credential returns the client's API key headers as the "authorization"
// selector sees them: Authorization as sent, with an x-api-key (Anthropic's
// header) or x-goog-api-key (Gemini's) counted as the bearer token it stands
// for, so one key is one tenant whichever header carries it. nil means no
// credential ("Authorization:" with no value is none either).
func credential(h http.Header) []string {
	var vals []string
	for _, v := range h.Values("Authorization") {
		if strings.TrimSpace(v) != "" {
			vals = append(vals, v)
		}
	}
	for _, name := range []string{"X-Api-Key", "X-Goog-Api-Key"} {
		for _, v := range h.Values(name) {
			if v = strings.TrimSpace(v); v != "" && !slices.Contains(vals, "Bearer "+v) {
				vals = append(vals, "Bearer "+v)
			}
		}
	}
	return vals
}

// SecretFingerprint identifies a partition secret without revealing it:
// the first 16 bytes of HMAC-SHA256(secret, a fixed label), in hex. Replicas
// that share a store record and compare it, since replicas with different
// secrets compute different partitions for the same tenant and would each
// see only their own entries (the secret cannot be derived from it: HMAC is
// a PRF keyed by the secret).
func SecretFingerprint(secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("breakwater partition-secret fingerprint v1"))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// LoadOrCreateSecret returns the partition secret kept in dir/partition.key,
// creating it (32 random bytes, mode 0600) on first use. Creation is atomic:
// a crash leaves either no file or a complete one, and of two processes
// racing to create it both end up with the same secret.
func LoadOrCreateSecret(dir string) ([]byte, error) {
	path := filepath.Join(dir, SecretFile)
	if b, err := readSecret(path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return b, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create secret dir: %w", err)
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("generate secret: %w", err)
	}
	tmp, err := os.CreateTemp(dir, SecretFile+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("create secret: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("create secret: %w", err)
	}
	if _, err := tmp.Write(secret); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("write secret: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("write secret: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("write secret: %w", err)
	}
	// Link, unlike Rename, fails when the target exists: whoever links first
	// wins and everyone else reads the winner's secret.
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return readSecret(path)
		}
		return nil, fmt.Errorf("create secret: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // make the new name durable; best effort on odd filesystems
		d.Close()
	}
	return secret, nil
}

func readSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read secret: %w", err)
	}
	if len(b) < MinSecretLen {
		return nil, fmt.Errorf("read secret: %s has %d bytes, need at least %d (delete it to generate a new one)", path, len(b), MinSecretLen)
	}
	return b, nil
}

// endUserHashLen is how many bytes of the HMAC an end user's hash keeps:
// 128 bits, far beyond any collision among the users of one partition.
const endUserHashLen = 16

// EndUserHash is the keyed hash of an end-user identity within a partition
// (Entry.User): the first 16 bytes of HMAC-SHA256(secret, label, partition,
// id), in hex; "" for an empty id (the anonymous user). The partition is
// hashed in, so one id in two tenants gives unrelated hashes, and without
// the secret a hash cannot be tested against guessed ids.
func EndUserHash(secret []byte, partition, id string) string {
	if id == "" {
		return ""
	}
	m := hmac.New(sha256.New, secret)
	var n [8]byte
	m.Write([]byte("breakwater-end-user-v1"))
	binary.BigEndian.PutUint64(n[:], uint64(len(partition)))
	m.Write(n[:])
	m.Write([]byte(partition))
	m.Write([]byte(id))
	return hex.EncodeToString(m.Sum(nil)[:endUserHashLen])
}
