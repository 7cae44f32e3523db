package seal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestSealOpen(t *testing.T) {
	s, err := New(bytes.Repeat([]byte("k"), MinKeyBytes))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := New(bytes.Repeat([]byte("o"), MinKeyBytes))
	ad := AD("t1", "crm")
	sealed := s.Seal(ad, []byte("hunter2-hunter2"))
	if bytes.Contains(sealed, []byte("hunter2")) {
		t.Fatal("sealed value shows the plaintext")
	}
	if got, err := s.Open(ad, sealed); err != nil || string(got) != "hunter2-hunter2" {
		t.Fatalf("open = %q, %v", got, err)
	}
	for name, tc := range map[string]struct {
		s      *Sealer
		ad     []byte
		sealed []byte
	}{
		"another tenant":  {s, AD("t2", "crm"), sealed},
		"parts moved":     {s, AD("t1c", "rm"), sealed},
		"another key":     {other, ad, sealed},
		"damaged":         {s, ad, append(append([]byte(nil), sealed[:len(sealed)-1]...), sealed[len(sealed)-1]^1)},
		"short":           {s, ad, sealed[:10]},
		"unknown version": {s, ad, append([]byte{9}, sealed[1:]...)},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := tc.s.Open(tc.ad, tc.sealed); !errors.Is(err, ErrOpen) {
				t.Errorf("open: %v, want ErrOpen", err)
			}
		})
	}
	if a, b := s.Seal(ad, []byte("x")), s.Seal(ad, []byte("x")); bytes.Equal(a, b) {
		t.Error("two seals of one value are equal: the nonce is not fresh")
	}
}

func TestNewRefusesShortKey(t *testing.T) {
	if _, err := New(make([]byte, MinKeyBytes-1)); err == nil {
		t.Fatal("a 31-byte key was taken")
	}
	if _, err := New(make([]byte, MinKeyBytes)); err != nil {
		t.Fatalf("a 32-byte key: %v", err)
	}
}

func TestFromDir(t *testing.T) {
	dir := t.TempDir()
	a, err := FromDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != 32 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	b, err := FromDir(dir) // the same key again
	if err != nil {
		t.Fatal(err)
	}
	ad := AD("t1", "x")
	if got, err := b.Open(ad, a.Seal(ad, []byte("v"))); err != nil || string(got) != "v" {
		t.Fatalf("reopened key: %q %v", got, err)
	}
	os.WriteFile(filepath.Join(dir, KeyFile), []byte("short"), 0o600)
	if _, err := FromDir(dir); err == nil {
		t.Error("a short key file was taken")
	}
}
