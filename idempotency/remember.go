package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acme/orders/bytecache"
)

// remembered is a completed key as stored: what a replay needs without reading the stream,
// in a compact form (see pack), so that many keys fit the budget and the collector has few
// objects to scan. An outcome too large to keep in memory is left in the store (onDisk): its
// replay reads it there, and the memory spares it only the claim and the command it would run
// otherwise.
type remembered struct {
	fingerprint [sha256.Size]byte // of the key's first request (digestOf)
	digest      Digest            // of the bytes of a request that ran with the key, if known (Request.Digest)
	expiresAt   int64             // Unix nanoseconds
	status      int
	position    uint64
	onDisk      bool
	code        string
	headers     string // name, NUL, value, NUL, for each header in name order
	body        string
}

// memoryKey identifies a key stream in memory: the digest its name holds.
type memoryKey [sha256.Size]byte

// keyOf returns the memory key of a key stream, named by StreamName.
func keyOf(stream string) memoryKey {
	var k memoryKey
	if name, ok := strings.CutPrefix(stream, StreamPrefix); ok && len(name) == 2*len(k) {
		if _, err := hex.Decode(k[:], []byte(name)); err == nil {
			return k
		}
	}
	return sha256.Sum256([]byte(stream)) // a name StreamName did not make: hashed instead
}

// digestOf returns the 32 bytes a fingerprint (hex SHA-256, see Fingerprint) spells; any other
// string is hashed.
func digestOf(fingerprint string) [sha256.Size]byte {
	var d [sha256.Size]byte
	if len(fingerprint) == 2*len(d) {
		if _, err := hex.Decode(d[:], []byte(fingerprint)); err == nil {
			return d
		}
	}
	return sha256.Sum256([]byte(fingerprint))
}

// pack returns the compact form of a completed key; ok is false if a header holds a NUL,
// which no HTTP header can: such an outcome is not remembered.
func pack(fingerprint string, expiresAt time.Time, out Outcome) (r remembered, ok bool) {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(out.Headers)) {
		v := out.Headers[name]
		if strings.IndexByte(name, 0) >= 0 || strings.IndexByte(v, 0) >= 0 {
			return remembered{}, false
		}
		b.WriteString(name)
		b.WriteByte(0)
		b.WriteString(v)
		b.WriteByte(0)
	}
	return remembered{fingerprint: digestOf(fingerprint), expiresAt: expiresAt.UnixNano(), status: out.Status,
		position: out.Position, code: out.Code, headers: b.String(), body: out.Body}, true
}

// outcome returns the outcome remembered, as it was recorded.
func (r remembered) outcome() *Outcome {
	out := &Outcome{Status: r.status, Code: r.code, Body: r.body, Position: r.position}
	if r.headers != "" {
		out.Headers = make(map[string]string, strings.Count(r.headers, "\x00")/2)
		for rest := r.headers; rest != ""; {
			var name, v string
			name, rest, _ = strings.Cut(rest, "\x00")
			v, rest, _ = strings.Cut(rest, "\x00")
			out.Headers[name] = v
		}
	}
	return out
}

// is reports whether r was remembered for a first request with fingerprint and expiry.
func (r remembered) is(fingerprint string, expiresAt time.Time) bool {
	return r.fingerprint == digestOf(fingerprint) && r.expiresAt == expiresAt.UnixNano()
}

// RememberDefault is how many bytes of completed keys a Keys keeps in memory unless told
// otherwise.
const RememberDefault = 64 << 20

// What a remembered key takes beyond its strings: the LRU's list entry with the remembered
// struct, its map slot, the strings' headers. Charged generously: measured by
// BenchmarkRememberedBytes.
const entryOverhead = 384

// largestRemembered is the largest body of an outcome kept in memory, unless the cache's
// budget is under 64 times that: a few large answers would push out the many small ones, and
// their replays cost the read of their body anyway.
const largestRemembered = 64 << 10

// size is what remembering r costs in memory, in bytes.
func (r remembered) size() int64 {
	return int64(entryOverhead + len(r.code) + allocated(len(r.headers)) + allocated(len(r.body)))
}

// allocated bounds the heap that a string of n bytes takes: the allocator rounds it up to its
// size class, by at most an eighth up to 32 KiB, and to whole 8 KiB pages beyond.
func allocated(n int) int {
	if n <= 32<<10 {
		return n + n/8
	}
	return n + 8<<10
}

// completed is the memory of completed keys: their outcomes, bounded in bytes, so that their
// replays read nothing from the store, and a table of the keys completed (a hash of each), so
// that a retry of one whose outcome was pushed out reads the key before it claims it, rather
// than run its work only for the store to refuse its claim.
type completed struct {
	once       sync.Once
	here, read *memo // keys completed here; keys read back from the store
	known      knownKeys
}

// knownKeys is a table of key streams known to exist, a hash of each at a slot of its own: its
// size is fixed, and a key noted later takes the slot of an earlier one, which is then taken
// for new again (its claim refused, its request starts over reading it).
type knownKeys struct {
	mu    sync.Mutex
	slots []uint64
}

// knownShare is the part of RememberBytes the table of known keys takes: 8 bytes a key.
const knownShare = 8

// slot: a key stream's name ends in a SHA-256 (StreamName), whose first 64 bits hash the key.
func (t *knownKeys) slot(stream string) (int, uint64) {
	digits := strings.TrimPrefix(stream, StreamPrefix)
	h, _ := strconv.ParseUint(digits[:min(len(digits), 16)], 16, 64)
	h |= 1 // 0 is an empty slot
	return int((h >> 32) % uint64(len(t.slots))), h
}

func (t *knownKeys) note(stream string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.slots) > 0 {
		i, h := t.slot(stream)
		t.slots[i] = h
	}
}

func (t *knownKeys) has(stream string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.slots) == 0 {
		return false
	}
	i, h := t.slot(stream)
	return t.slots[i] == h
}

// memo is a cache of remembered keys bounded by the bytes they take (remembered.size).
type memo struct {
	*bytecache.Cache[memoryKey, remembered]
	largest int64 // outcomes above are kept on disk only
}

// add remembers r under key, its outcome left on disk if it is too large.
func (m *memo) add(key memoryKey, r remembered) {
	if int64(len(r.body)) > m.largest {
		r.code, r.headers, r.body, r.onDisk = "", "", "", true
	}
	m.Add(key, r, r.size())
}

// memory returns the cache of keys completed here, or nil if RememberBytes turned it off, and
// the cache of keys read from the store for a replay. Were they one, the replays of keys older
// than the memory holds, oldest first (a client sending its backlog again, the load harness's
// replay phase), would each push out the oldest key remembered, which is the one the next
// replays ask for: every one of them would read the store (an LRU cache's sequential scan;
// with one cache the harness's replays took 1.76 times the processor time). Kept apart, the
// keys read push out only each other. The budget: an eighth for the table of known keys, an
// eighth for the keys read, the rest for the keys completed here.
func (k *Keys) memory() (here, read *memo) {
	m := &k.completed
	m.once.Do(func() {
		n := k.RememberBytes
		if n == 0 {
			n = RememberDefault
		}
		if n > 0 {
			keys := max(n/knownShare/8, 1)
			m.known = knownKeys{slots: make([]uint64, keys)}
			m.read = newMemo(max(n/8, 1))
			m.here = newMemo(max(n-n/8-8*keys, 1))
		}
	})
	return m.here, m.read
}

func newMemo(budget int64) *memo {
	// No entry costs less than its overhead.
	return &memo{Cache: bytecache.New[memoryKey, remembered](budget, entryOverhead), largest: min(largestRemembered, budget/64)}
}

func (m *memo) size() int64 {
	if m == nil {
		return 0
	}
	return m.Bytes()
}

// RememberedBytes returns how many bytes the completed keys kept in memory take, as charged
// against RememberBytes: their outcomes, and the table of known keys.
func (k *Keys) RememberedBytes() int64 {
	here, read := k.memory()
	return here.size() + read.size() + 8*int64(len(k.completed.known.slots))
}

// known reports whether the key stream is known to exist: completed here, or read back.
func (k *Keys) known(stream string) bool {
	k.memory() // sizes the table
	return k.completed.known.has(stream)
}

// remember keeps the outcome stored in a key's stream for later replays, with the keys
// completed here, or with those read from the store if read is set, and bytes, the digest of a
// request that ran with the key (zero if unknown), for RecallBytes. A completed key never
// changes until it expires, so what is kept stays true on every node.
func (k *Keys) remember(stream string, first Claimed, done *Completed, bytes Digest, read bool) {
	m, fromStore := k.memory()
	if m == nil || done == nil {
		return
	}
	if read {
		m = fromStore
	}
	k.completed.known.note(stream)
	if r, ok := pack(first.Fingerprint, first.ExpiresAt, done.Outcome); ok {
		r.digest = bytes
		m.add(keyOf(stream), r)
	}
}

// recall returns the completed key stream as remembered, unless it is unknown here or has
// expired.
func (k *Keys) recall(stream string, now time.Time) (remembered, bool) {
	here, fromStore := k.memory()
	if here == nil {
		return remembered{}, false
	}
	key := keyOf(stream)
	m := here
	r, ok := here.Get(key)
	if !ok {
		m = fromStore
		r, ok = fromStore.Get(key)
	}
	if ok && r.expiresAt <= now.UnixNano() {
		m.Remove(key)
		return remembered{}, false
	}
	return r, ok
}

// outcomeOnDisk reads the outcome of a completed key that memory left in the store, or nil if
// the stream no longer holds the outcome remembered (expired, and claimed anew since), which
// is then forgotten.
func (k *Keys) outcomeOnDisk(ctx context.Context, stream string, r remembered) (*Outcome, error) {
	st, err := k.read(ctx, stream)
	if err != nil {
		return nil, err
	}
	if st.done == nil || !r.is(st.first.Fingerprint, st.first.ExpiresAt) {
		here, fromStore := k.memory()
		here.Remove(keyOf(stream))
		fromStore.Remove(keyOf(stream))
		return nil, nil
	}
	if err := k.position(ctx, st.done); err != nil {
		return nil, err
	}
	return &st.done.Outcome, nil
}
