package tools

import (
	"encoding/base64"
	"strings"
	"testing"

	b64 "github.com/segmentio/asm/base64"
)

// TestBase64AcceptsWhatTheStandardDoes: storage decodes data_base64 with
// segmentio/asm for speed; it must accept and refuse exactly what
// encoding/base64's StdEncoding does (padding, alphabet, line breaks,
// lengths on both sides of the AVX2 block size).
func TestBase64AcceptsWhatTheStandardDoes(t *testing.T) {
	long := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("0123456789abcdef", 20)))
	for _, s := range []string{
		"", "QQ==", "QQ=", "QQ", "QR==", "Q===", "QUJD", "QUJD\n", "QU\r\nJD", "QU JD", "QUJD====", "!!!!",
		"QUJDRA==QUJD", "QUJD-_==", long, long[:len(long)-1], long + "=", long[:40] + "*" + long[41:],
		long[:64] + "\n" + long[64:], strings.Replace(long, "A", "-", 1),
	} {
		want, wantErr := base64.StdEncoding.DecodeString(s)
		got, err := b64.StdEncoding.DecodeString(s)
		if (wantErr == nil) != (err == nil) || string(got) != string(want) {
			t.Errorf("%.30q...: encoding/base64 gives %d bytes, err %v; asm gives %d bytes, err %v", s, len(want), wantErr, len(got), err)
		}
	}
}
