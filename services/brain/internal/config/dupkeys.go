package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// maxDepth is how deeply duplicateKeys follows nested arrays and objects;
// encoding/json refuses documents nested deeper than this too.
const maxDepth = 10000

// duplicateKey is an object key written more than once in the same object.
// Path leads from the document's root to that object: string elements are
// object keys, int elements array indexes.
type duplicateKey struct {
	Path []any
	Key  string
}

// errTooDeep is duplicateKeys's error for a document nested past maxDepth.
var errTooDeep = fmt.Errorf("nested deeper than %d levels", maxDepth)

// duplicateKeys reads the JSON document data token by token and returns
// every key that appears more than once within one object, once per object,
// in document order. Keys are compared after unescaping ("a" and "\u0061"
// are the same key) and case-sensitively, as JSON defines them.
// encoding/json keeps the last of duplicate keys without a word, so the
// host config refuses them. On malformed JSON, or nesting deeper than
// maxDepth, it returns what it found so far and the error.
func duplicateKeys(data []byte) ([]duplicateKey, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var dups []duplicateKey
	// value reads one JSON value whose location is path.
	var value func(path []any) error
	value = func(path []any) error {
		if len(path) > maxDepth {
			return errTooDeep
		}
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]int{}
			for dec.More() {
				tok, err := dec.Token()
				if err != nil {
					return err
				}
				key, _ := tok.(string)
				if seen[key]++; seen[key] == 2 {
					dups = append(dups, duplicateKey{Path: append([]any(nil), path...), Key: key})
				}
				if err := value(append(path, key)); err != nil {
					return err
				}
			}
			_, err = dec.Token() // '}'
			return err
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if err := value(append(path, i)); err != nil {
					return err
				}
			}
			_, err = dec.Token() // ']'
			return err
		}
		return nil
	}
	if err := value(nil); err != nil {
		return dups, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return dups, errors.New("unexpected data after the JSON value")
	}
	return dups, nil
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// fieldPath renders a path as the config's errors name fields:
// input_schema.properties.text, tenants[2], properties["a.b"].
func fieldPath(path []any) string {
	var sb strings.Builder
	for _, p := range path {
		switch p := p.(type) {
		case int:
			fmt.Fprintf(&sb, "[%d]", p)
		case string:
			if !identRE.MatchString(p) {
				fmt.Fprintf(&sb, "[%q]", p)
				continue
			}
			if sb.Len() > 0 {
				sb.WriteByte('.')
			}
			sb.WriteString(p)
		}
	}
	return sb.String()
}
