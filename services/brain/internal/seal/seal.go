// Package seal encrypts the secrets brain keeps for tenants — the values of
// tenant secrets that custom tools send as their bearer token, and the
// header values of a session's MCP servers — so that the database alone (a
// copy of brain.db, a dump of the PostgreSQL database) does not reveal them.
//
// A Sealer is AES-256-GCM (the standard library's crypto/aes and
// crypto/cipher) under a key derived with HKDF-SHA256 from the operator's
// key material: BRAIN_SECRETS_KEY, or a key file of 32 random bytes that
// brain creates in its data directory when that variable is unset. Each
// sealed value is bound to what it belongs to (the associated data names
// the tenant and the secret), so a sealed value copied into another
// tenant's row does not open. Layout: version byte 1, a 12-byte random
// nonce, the ciphertext with its 16-byte tag.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// MinKeyBytes is the least key material a Sealer takes.
const MinKeyBytes = 32

// KeyFile is the name of the key file in brain's data directory.
const KeyFile = "secrets.key"

const version = 1

// Sealer seals and opens values. It is safe for concurrent use.
type Sealer struct {
	aead cipher.AEAD
}

// New derives the sealing key from material (at least MinKeyBytes bytes).
func New(material []byte) (*Sealer, error) {
	if len(material) < MinKeyBytes {
		return nil, fmt.Errorf("secrets key: want at least %d bytes, got %d", MinKeyBytes, len(material))
	}
	key, err := hkdf.Key(sha256.New, material, nil, "brain tenant secrets v1", 32)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// FromDir reads the key file in dir, creating it (32 random bytes, mode
// 0600) when it is missing: the embedded default, where one brain owns the
// data directory. Replicas sharing a database set BRAIN_SECRETS_KEY
// instead, the same on each.
func FromDir(dir string) (*Sealer, error) {
	path := filepath.Join(dir, KeyFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		data = make([]byte, 32)
		rand.Read(data)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("create secrets key file: %w", err)
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			return nil, fmt.Errorf("write secrets key file: %w", err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, fmt.Errorf("write secrets key file: %w", err)
		}
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("write secrets key file: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("read secrets key file: %w", err)
	}
	return New(data)
}

// Seal encrypts plaintext for the owner ad names (e.g. tenant and secret
// name); only Open with the same ad opens it.
func (s *Sealer) Seal(ad, plaintext []byte) []byte {
	out := make([]byte, 1+s.aead.NonceSize(), 1+s.aead.NonceSize()+len(plaintext)+s.aead.Overhead())
	out[0] = version
	rand.Read(out[1:])
	return s.aead.Seal(out, out[1:], plaintext, ad)
}

// ErrOpen is Open's refusal: the value was sealed under another key or for
// another owner, or is damaged.
var ErrOpen = errors.New("sealed value does not open with this key (another BRAIN_SECRETS_KEY, another owner, or damaged)")

// Open decrypts a value Seal made for ad.
func (s *Sealer) Open(ad, sealed []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < 1+n+s.aead.Overhead() || sealed[0] != version {
		return nil, ErrOpen
	}
	out, err := s.aead.Open(nil, sealed[1:1+n], sealed[1+n:], ad)
	if err != nil {
		return nil, ErrOpen
	}
	return out, nil
}

// AD joins the parts of an owner's name into associated data, each part
// length-prefixed so that no two lists of parts join alike.
func AD(parts ...string) []byte {
	var b []byte
	for _, p := range parts {
		b = fmt.Appendf(b, "%d:%s;", len(p), p)
	}
	return b
}
