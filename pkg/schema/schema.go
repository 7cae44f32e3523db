// Package schema compiles and applies the JSON Schemas of tool bindings the
// way the tool contract asks: draft 2020-12 unless a schema's $schema names
// another draft, `format` keywords asserted, and external $ref references
// never loaded. It wraps github.com/santhosh-tekuri/jsonschema/v6.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// MaxErrors caps how many failing values one validation error lists.
const MaxErrors = 5

// Schema is a compiled schema, safe for concurrent use.
type Schema struct {
	s *jsonschema.Schema
}

// refusingLoader is the compiler's URL loader: every load is refused, so a
// schema can only refer inside itself (the metaschemas are embedded in the
// library and never reach a loader).
type refusingLoader struct{}

func (refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %s is not loaded: a binding's schema may only refer inside itself", url)
}

// Compile compiles doc. field names the schema in errors ("input_schema").
func Compile(field string, doc []byte) (*Schema, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("%s: not valid JSON: %w", field, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(refusingLoader{})
	loc := "mem:///" + field + ".json"
	if err := c.AddResource(loc, v); err != nil {
		return nil, fmt.Errorf("%s: %s", field, oneLine(err.Error()))
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("%s: does not compile as JSON Schema: %s", field, oneLine(err.Error()))
	}
	return &Schema{s: s}, nil
}

// Validate checks the JSON document doc. what names it in errors
// ("arguments", "structured_content"); each failing value is named by its
// JSON pointer (RFC 6901), at most MaxErrors of them:
//
//	arguments: at "/text": maxLength: got 5000, want 4096
func (s *Schema) Validate(what string, doc []byte) error {
	if len(bytes.TrimSpace(doc)) == 0 {
		return fmt.Errorf("%s: required: must be a JSON value", what)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("%s: not valid JSON: %w", what, err)
	}
	if err := checkNumbers(what, v); err != nil {
		return err
	}
	return s.validate(what, v)
}

// MaxNumberLength is the longest number literal a document may hold, in
// characters. The validator compares numbers exactly (as big rationals),
// which costs time quadratic in their length: a megabyte of digits took
// seconds. 400 characters hold any number an IEEE double can tell apart
// and more; RFC 7493 (I-JSON) section 2.2 asks for no more than that.
const MaxNumberLength = 400

// checkNumbers refuses a number in v longer than MaxNumberLength, naming
// it by its JSON pointer.
func checkNumbers(what string, v any) error {
	loc, n := longNumber(v)
	if n == 0 {
		return nil
	}
	slices.Reverse(loc)
	at := jsonPointer(loc)
	if at == "" {
		at = "/"
	}
	return fmt.Errorf("%s: at %s: number is %d characters long, more than the %d allowed (RFC 7493 I-JSON)", what, at, n, MaxNumberLength)
}

// longNumber finds a number in v longer than MaxNumberLength and returns
// its length n and its location, innermost token first. The location is
// built only for the number found, so a document within the limit costs a
// walk and no allocation.
func longNumber(v any) (loc []string, n int) {
	switch v := v.(type) {
	case json.Number:
		if len(v) > MaxNumberLength {
			return nil, len(v)
		}
	case map[string]any:
		for k, e := range v {
			if loc, n := longNumber(e); n > 0 {
				return append(loc, k), n
			}
		}
	case []any:
		for i, e := range v {
			if loc, n := longNumber(e); n > 0 {
				return append(loc, strconv.Itoa(i)), n
			}
		}
	}
	return nil, 0
}

// ValidateObject is Validate for a document that must be a JSON object
// whatever the schema says (a tool call's arguments).
func (s *Schema) ValidateObject(what string, doc []byte) error {
	if len(bytes.TrimSpace(doc)) == 0 {
		return fmt.Errorf("%s: required: must be a JSON object", what)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("%s: not valid JSON: %w", what, err)
	}
	if _, ok := v.(map[string]any); !ok {
		return fmt.Errorf("%s: must be a JSON object", what)
	}
	if err := checkNumbers(what, v); err != nil {
		return err
	}
	return s.validate(what, v)
}

var printer = message.NewPrinter(language.English)

func (s *Schema) validate(what string, v any) error {
	err := s.s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("%s: %w", what, err)
	}
	var leaves []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, fmt.Sprintf("at %s: %s", pointer(e.InstanceLocation), oneLine(e.ErrorKind.LocalizedString(printer))))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	extra := ""
	if len(leaves) > MaxErrors {
		extra = fmt.Sprintf("; and %d more", len(leaves)-MaxErrors)
		leaves = leaves[:MaxErrors]
	}
	return fmt.Errorf("%s: %s%s", what, strings.Join(leaves, "; "), extra)
}

// pointer renders an instance location as a quoted JSON pointer; the whole
// document is (root).
func pointer(loc []string) string {
	if len(loc) == 0 {
		return "(root)"
	}
	return strconv.Quote(jsonPointer(loc))
}

// jsonPointer renders loc's tokens as a JSON pointer (RFC 6901), "" for
// the whole document.
func jsonPointer(loc []string) string {
	var b strings.Builder
	for _, tok := range loc {
		b.WriteByte('/')
		tok = strings.ReplaceAll(tok, "~", "~0")
		b.WriteString(strings.ReplaceAll(tok, "/", "~1"))
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
