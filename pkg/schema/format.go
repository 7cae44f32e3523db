package schema

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/net/idna"
)

// newCompiler is the compiler every schema of the package is compiled
// with (Compile, and the plan's formats): JSON Schema 2020-12 unless the
// schema says another draft, formats asserted, idn-hostname and idn-email
// among them, and no reference loaded from outside the schema.
func newCompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(refusingLoader{})
	c.RegisterFormat(&jsonschema.Format{Name: "idn-hostname", Validate: validateIDNHostname})
	c.RegisterFormat(&jsonschema.Format{Name: "idn-email", Validate: validateIDNEmail})
	return c
}

// maxIDNBytes bounds the UTF-8 form of an internationalized host name
// worth converting: its ASCII form holds at most 253 characters (RFC
// 1034), and no code point takes fewer than one of them nor more than four
// bytes; a longer string is refused before the conversion, which costs
// ~100 ns a byte.
const maxIDNBytes = 4 * 253

// validateIDNHostname asserts format "idn-hostname" (JSON Schema 2020-12
// section 7.3.3: RFC 5890, section 2.3.2.3): the name converts to its
// ASCII form under the rules for registering one (RFC 5891 section 4,
// golang.org/x/net/idna's Registration profile: no mapping, the bidi and
// joiner rules, each label at most 63 characters, the whole at most 253).
func validateIDNHostname(v any) error {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	_, err := idnToASCII(s)
	return err
}

func idnToASCII(s string) (string, error) {
	if len(s) > maxIDNBytes {
		return "", fmt.Errorf("more than %d bytes long", maxIDNBytes)
	}
	a, err := idna.Registration.ToASCII(s)
	if err != nil {
		return "", errors.New(strings.TrimPrefix(err.Error(), "idna: "))
	}
	return a, nil
}

// validateIDNEmail asserts format "idn-email" (JSON Schema 2020-12
// section 7.3.2: RFC 6531): an email address as format "email" checks it,
// but that its local part may hold any UTF-8 beyond ASCII and its domain
// is an internationalized host name (validateIDNHostname) or an address
// literal.
func validateIDNEmail(v any) error {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	if len(s) > 4*254 {
		return fmt.Errorf("more than %d bytes long", 4*254)
	}
	at := strings.LastIndexByte(s, '@')
	if at < 0 {
		return errors.New("missing @")
	}
	local, domain := s[:at], s[at+1:]
	// A character beyond ASCII is allowed wherever a letter is.
	local = strings.Map(func(r rune) rune {
		if r >= utf8.RuneSelf {
			return 'a'
		}
		return r
	}, local)
	if !strings.HasPrefix(domain, "[") {
		a, err := idnToASCII(domain)
		if err != nil {
			return fmt.Errorf("invalid domain: %w", err)
		}
		domain = a
	}
	return emailFormat()(local + "@" + domain)
}

// emailFormat is the validator library's own format "email", which
// idn-email checks the ASCII form of an address with.
var emailFormat = sync.OnceValue(func() func(any) error {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("mem:///email.json", map[string]any{"format": "email"}); err != nil {
		panic(err)
	}
	s, err := c.Compile("mem:///email.json")
	if err != nil || s.Format == nil {
		panic(fmt.Sprintf("the validator's email format: %v", err))
	}
	return s.Format.Validate
})
