package webhooks

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// SecretPrefix starts every signing secret shown to a client, as Standard Webhooks' secrets do;
// the rest is the base64 of the HMAC key.
const SecretPrefix = "whsec_"

// secretBytes is the size of a signing key: 256 bits.
const secretBytes = 32

// Sealer encrypts signing secrets with AES-256-GCM under the operator's key, which lives
// outside the data directory (a file or an environment variable): the events in the store hold
// only sealed secrets, so a copy of the data directory alone does not reveal them. The
// endpoint's id is the additional data, so a sealed secret cannot be moved to another endpoint.
type Sealer struct {
	aead cipher.AEAD
}

// NewSealer makes a Sealer from a 32-byte key.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("webhook secret key: %d bytes, want 32", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead}, nil
}

// ParseKey reads a key written as 64 hex digits (as GenerateKeyFile writes it).
func ParseKey(text string) ([]byte, error) {
	key, err := hex.DecodeString(strings.TrimSpace(text))
	if err != nil || len(key) != 32 {
		return nil, errors.New("webhook secret key: want 64 hex digits (32 bytes)")
	}
	return key, nil
}

// LoadKeyFile reads the key in path. With generate, a missing file is created with a new
// random key (mode 0600). The file may not be inside dataDir: the point of the key is that a
// copy of the data directory does not carry it.
func LoadKeyFile(path, dataDir string, generate bool) ([]byte, error) {
	if inside(path, dataDir) {
		return nil, fmt.Errorf("webhook secret key file %s is inside the data directory %s; keep it elsewhere", path, dataDir)
	}
	return ReadKeyFile(path, generate)
}

// ReadKeyFile reads the key in path, wherever it is; with generate, a missing file is created
// with a new random key (mode 0600).
func ReadKeyFile(path string, generate bool) ([]byte, error) {
	text, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && generate {
		key := make([]byte, 32)
		rand.Read(key)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("create webhook secret key file: %w", err)
		}
		_, werr := f.WriteString(hex.EncodeToString(key) + "\n")
		if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
			return nil, fmt.Errorf("write webhook secret key file: %w", err)
		}
		return key, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read webhook secret key file: %w", err)
	}
	return ParseKey(string(text))
}

func inside(path, dir string) bool {
	p, err1 := filepath.Abs(path)
	d, err2 := filepath.Abs(dir)
	if err1 != nil || err2 != nil {
		return false
	}
	rel, err := filepath.Rel(d, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// NewSecret draws a signing secret: its text for the client, and the HMAC key.
func NewSecret() (text string, key []byte) {
	key = make([]byte, secretBytes)
	rand.Read(key)
	return SecretPrefix + base64.StdEncoding.EncodeToString(key), key
}

// Seal encrypts key for endpoint id.
func (s *Sealer) Seal(id string, key []byte) string {
	nonce := make([]byte, s.aead.NonceSize())
	rand.Read(nonce)
	return base64.StdEncoding.EncodeToString(s.aead.Seal(nonce, nonce, key, []byte(id)))
}

// Open decrypts a sealed key of endpoint id.
func (s *Sealer) Open(id, sealed string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(sealed)
	if err != nil || len(raw) < s.aead.NonceSize() {
		return nil, fmt.Errorf("sealed secret of endpoint %s: malformed", id)
	}
	n := s.aead.NonceSize()
	key, err := s.aead.Open(nil, raw[:n], raw[n:], []byte(id))
	if err != nil {
		return nil, fmt.Errorf("sealed secret of endpoint %s: %w (another webhook secret key?)", id, err)
	}
	return key, nil
}
