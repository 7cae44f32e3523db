package config

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// maxSchemaErrors caps how many failing values one validation error lists.
const maxSchemaErrors = 5

var printer = message.NewPrinter(language.English)

// refusingLoader is the compiler's URLLoader: the contract says external
// $ref references aren't loaded, so every load is refused (the JSON Schema
// metaschemas are embedded in the library and never reach a loader).
type refusingLoader struct{}

func (refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %s is not loaded: a binding's schema may only refer inside itself", url)
}

// compileSchema compiles one binding schema as draft 2020-12 (unless its
// $schema names another draft), with format assertions on and every
// external reference refused. field names the schema in errors.
func compileSchema(field string, doc []byte) (*jsonschema.Schema, error) {
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
	return s, nil
}

// validate checks doc against s. what names the document in errors
// ("arguments", "structured_content"); with object set, doc must be a JSON
// object whatever the schema says.
func validate(s *jsonschema.Schema, what string, doc []byte, object bool) error {
	if len(bytes.TrimSpace(doc)) == 0 {
		return fmt.Errorf("%s: required: must be a JSON value", what)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("%s: not valid JSON: %w", what, err)
	}
	if _, ok := v.(map[string]any); object && !ok {
		return fmt.Errorf("%s: must be a JSON object", what)
	}
	err = s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("%s: %w", what, err)
	}
	var leaves []string
	collectLeaves(ve, &leaves)
	extra := ""
	if len(leaves) > maxSchemaErrors {
		extra = fmt.Sprintf("; and %d more", len(leaves)-maxSchemaErrors)
		leaves = leaves[:maxSchemaErrors]
	}
	return fmt.Errorf("%s: %s%s", what, strings.Join(leaves, "; "), extra)
}

// collectLeaves appends one line per innermost failure: the JSON pointer of
// the value and what is wrong with it.
func collectLeaves(e *jsonschema.ValidationError, out *[]string) {
	if len(e.Causes) == 0 {
		*out = append(*out, fmt.Sprintf("at %s: %s", pointer(e.InstanceLocation), e.ErrorKind.LocalizedString(printer)))
		return
	}
	for _, c := range e.Causes {
		collectLeaves(c, out)
	}
}

// pointer renders an instance location as a JSON pointer (RFC 6901);
// the whole document is "(root)".
func pointer(loc []string) string {
	if len(loc) == 0 {
		return "(root)"
	}
	var b strings.Builder
	for _, tok := range loc {
		b.WriteByte('/')
		tok = strings.ReplaceAll(tok, "~", "~0")
		b.WriteString(strings.ReplaceAll(tok, "/", "~1"))
	}
	return fmt.Sprintf("%q", b.String())
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}
