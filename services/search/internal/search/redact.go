package search

import (
	"net/url"
	"strings"
)

// MinSecretFragment is the shortest piece of a secret that Redact removes
// wherever it appears: a provider that echoes part of a key ("key
// BSAk3x9…") leaks that part.
const MinSecretFragment = 8

// Redacted replaces a secret in a message.
const Redacted = "[redacted]"

// Redact removes the secrets from msg: each secret whole (also
// URL-escaped), and for a secret of MinSecretFragment bytes or more every
// run of at least that many bytes that also occurs in it. Secrets shorter
// than 4 bytes are ignored (they would blank out ordinary words). It runs
// on every provider message before it reaches a result or a log: the
// contract's "Protect inspection tokens" asks the same of tokens, and a
// provider error that echoes the API key must not hand it to the agent.
func Redact(msg string, secrets ...string) string {
	if msg == "" {
		return msg
	}
	cover := make([]bool, len(msg))
	any := false
	mark := func(i, n int) {
		for j := i; j < i+n; j++ {
			cover[j] = true
		}
		any = true
	}
	for _, secret := range secrets {
		if len(secret) < 4 {
			continue
		}
		for _, form := range []string{secret, url.QueryEscape(secret)} {
			for i := 0; ; {
				k := strings.Index(msg[i:], form)
				if k < 0 {
					break
				}
				mark(i+k, len(form))
				i += k + 1
			}
		}
		if len(secret) < MinSecretFragment {
			continue
		}
		pieces := make(map[string]bool, len(secret))
		for i := 0; i+MinSecretFragment <= len(secret); i++ {
			pieces[secret[i:i+MinSecretFragment]] = true
		}
		for i := 0; i+MinSecretFragment <= len(msg); i++ {
			if pieces[msg[i:i+MinSecretFragment]] {
				mark(i, MinSecretFragment)
			}
		}
	}
	if !any {
		return msg
	}
	var b strings.Builder
	for i := 0; i < len(msg); {
		if !cover[i] {
			b.WriteByte(msg[i])
			i++
			continue
		}
		b.WriteString(Redacted)
		for i < len(msg) && cover[i] {
			i++
		}
	}
	return b.String()
}
