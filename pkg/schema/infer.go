package schema

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/brain-tools/suite/pkg/strictjson"
)

// TagName is the struct tag For reads limits from, beside the json tag
// (the property's name, omitempty for an optional one) and the jsonschema
// tag (its description, github.com/google/jsonschema-go's own):
//
//	Text    string   `json:"text" jsonschema:"The text to count." schema:"minLength=1,maxLength=65536"`
//	Seconds int      `json:"seconds,omitempty" schema:"minimum=1,maximum=3600,default=10"`
//	Mode    string   `json:"mode,omitempty" schema:"enum=text|markdown"`
//	Tags    []string `json:"tags,omitempty" schema:"maxItems=8,maxLength=64,pattern=^[a-z]+$"`
//
// Entries are keyword=value, separated by commas: minLength, maxLength,
// pattern, format, minimum, maximum, exclusiveMinimum, exclusiveMaximum,
// multipleOf, minItems, maxItems, uniqueItems (no value), minProperties,
// maxProperties, enum (values separated by |), default, title. pattern
// takes the rest of the tag, commas included, so it comes last. On an
// array or a map field, the array and object keywords apply to the field
// and the others to its items (or values).
const TagName = "schema"

// For infers the JSON Schema (draft 2020-12) of values of type T with
// github.com/google/jsonschema-go: a struct is an object whose properties
// are its exported fields by their json names, each required unless its
// json tag says omitempty or omitzero, with no other properties allowed. A
// pointer or slice field may also be null unless its tag says omitempty or
// omitzero (Go then leaves it out rather than write null, and a null sent
// in its place is refused). Values are described as encoding/json writes
// them: json.RawMessage as any value, []byte and strictjson.Base64 as a
// base64 string, time.Time as a date-time string. Descriptions come from
// the jsonschema tag and limits from the TagName tag. The result is the
// schema's JSON, ready for a binding's input_schema or output_schema.
// Errors name the field: an unsupported type (a channel, a func, a map
// with keys that are not strings), a bad tag.
func For[T any]() (json.RawMessage, error) {
	t := reflect.TypeFor[T]()
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: typeSchemas()})
	if err != nil {
		return nil, fmt.Errorf("infer schema of %s: %w", t, err)
	}
	if err := applyTags(t, s, t.String()); err != nil {
		return nil, fmt.Errorf("infer schema of %s: %w", t, err)
	}
	data, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("infer schema of %s: %w", t, err)
	}
	return data, nil
}

// MustFor is For for a schema declared at start-up (a tool's
// output_schema): it panics when T's schema cannot be inferred, a
// programming error found when the service starts.
func MustFor[T any]() json.RawMessage {
	doc, err := For[T]()
	if err != nil {
		panic(err)
	}
	return doc
}

// typeSchemas are the schemas of the types jsonschema-go describes by
// their Go kind rather than by the JSON encoding/json writes for them.
func typeSchemas() map[reflect.Type]*jsonschema.Schema {
	base64 := &jsonschema.Schema{Type: "string", ContentEncoding: "base64"}
	return map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[json.RawMessage]():   {},
		reflect.TypeFor[[]byte]():            base64,
		reflect.TypeFor[strictjson.Base64](): base64,
		reflect.TypeFor[time.Time]():         {Type: "string", Format: "date-time"},
	}
}

// notNull drops "null" from the types of s, the schema of a pointer or a
// slice field that Go omits when it is nil.
func notNull(s *jsonschema.Schema) {
	if len(s.Types) == 0 {
		return
	}
	types := slices.DeleteFunc(slices.Clone(s.Types), func(t string) bool { return t == "null" })
	if len(types) == 1 {
		s.Type, s.Types = types[0], nil
	} else {
		s.Types = types
	}
}

// applyTags walks t beside its inferred schema s and applies each struct
// field's TagName tag to the field's schema. at names t in errors.
func applyTags(t reflect.Type, s *jsonschema.Schema, at string) error {
	if s == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		return applyTags(t.Elem(), s, at)
	case reflect.Slice, reflect.Array:
		return applyTags(t.Elem(), s.Items, at+"[]")
	case reflect.Map:
		return applyTags(t.Elem(), s.AdditionalProperties, at+"{}")
	case reflect.Struct:
	default:
		return nil
	}
	for _, f := range reflect.VisibleFields(t) {
		if f.Anonymous || !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fs := s.Properties[name]
		if fs == nil {
			continue
		}
		if k := f.Type.Kind(); (k == reflect.Pointer || k == reflect.Slice) && omitted(opts) {
			notNull(fs)
		}
		if tag, ok := f.Tag.Lookup(TagName); ok {
			if err := applyTag(f.Type, fs, tag); err != nil {
				return fmt.Errorf("field %s.%s: %s tag: %w", at, f.Name, TagName, err)
			}
		}
		if err := applyTags(f.Type, fs, at+"."+f.Name); err != nil {
			return err
		}
	}
	return nil
}

// omitted reports whether json tag options (after the name) say omitempty
// or omitzero.
func omitted(opts string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == "omitempty" || o == "omitzero" {
			return true
		}
	}
	return false
}

// containerKeywords apply to an array or a map field itself; any other
// keyword on such a field applies to its items.
var containerKeywords = map[string]bool{
	"minItems": true, "maxItems": true, "uniqueItems": true,
	"minProperties": true, "maxProperties": true, "default": true, "title": true,
}

func applyTag(t reflect.Type, s *jsonschema.Schema, tag string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for tag != "" {
		var entry string
		if strings.HasPrefix(tag, "pattern=") {
			entry, tag = tag, ""
		} else {
			entry, tag, _ = strings.Cut(tag, ",")
		}
		key, val, hasVal := strings.Cut(strings.TrimSpace(entry), "=")
		target, elem := s, t
		if (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && !containerKeywords[key] {
			target, elem = s.Items, t.Elem()
		} else if t.Kind() == reflect.Map && !containerKeywords[key] {
			target, elem = s.AdditionalProperties, t.Elem()
		}
		if target == nil {
			return fmt.Errorf("%s: the field has no item schema", key)
		}
		if key == "uniqueItems" {
			if hasVal {
				return fmt.Errorf("uniqueItems takes no value")
			}
			target.UniqueItems = true
			continue
		}
		if !hasVal {
			return fmt.Errorf("%q: want keyword=value", entry)
		}
		if err := setKeyword(target, elem, key, val); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	return nil
}

func setKeyword(s *jsonschema.Schema, t reflect.Type, key, val string) error {
	num := func(dst **float64) error {
		f, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", val)
		}
		*dst = &f
		return nil
	}
	count := func(dst **int) error {
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 {
			return fmt.Errorf("%q is not a count (0 or more)", val)
		}
		*dst = &n
		return nil
	}
	switch key {
	case "minLength":
		return count(&s.MinLength)
	case "maxLength":
		return count(&s.MaxLength)
	case "minItems":
		return count(&s.MinItems)
	case "maxItems":
		return count(&s.MaxItems)
	case "minProperties":
		return count(&s.MinProperties)
	case "maxProperties":
		return count(&s.MaxProperties)
	case "minimum":
		return num(&s.Minimum)
	case "maximum":
		return num(&s.Maximum)
	case "exclusiveMinimum":
		return num(&s.ExclusiveMinimum)
	case "exclusiveMaximum":
		return num(&s.ExclusiveMaximum)
	case "multipleOf":
		return num(&s.MultipleOf)
	case "pattern":
		s.Pattern = val
	case "format":
		s.Format = val
	case "title":
		s.Title = val
	case "enum":
		for _, v := range strings.Split(val, "|") {
			x, err := literal(t, v)
			if err != nil {
				return err
			}
			s.Enum = append(s.Enum, x)
		}
	case "default":
		x, err := literal(t, val)
		if err != nil {
			return err
		}
		data, err := json.Marshal(x)
		if err != nil {
			return err
		}
		s.Default = data
	default:
		return fmt.Errorf("unknown keyword (want one of minLength, maxLength, pattern, format, minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf, minItems, maxItems, uniqueItems, minProperties, maxProperties, enum, default, title)")
	}
	return nil
}

// literal reads v as a value of t's kind: a string as it is, a number or
// a boolean parsed.
func literal(t reflect.Type, v string) (any, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return v, nil
	case reflect.Bool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%q is not a boolean", v)
		}
		return b, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", v)
		}
		return n, nil
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", v)
		}
		return f, nil
	}
	return nil, fmt.Errorf("a value for a field of type %s cannot be written in a tag", t)
}
