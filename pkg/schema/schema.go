// Package schema compiles and applies the JSON Schemas of tool bindings the
// way the tool contract asks: draft 2020-12 unless a schema's $schema names
// another draft, `format` keywords asserted, and external $ref references
// never loaded. It wraps github.com/santhosh-tekuri/jsonschema/v6, with a
// fast path compiled once per schema for the shapes tools declare (plan.go):
// a tool call's arguments are checked on every call, on both transports.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/brain-tools/suite/pkg/strictjson"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// MaxErrors caps how many failing values one validation error lists.
const MaxErrors = 5

// MaxDepth is how deeply a schema may nest objects and arrays, and
// MaxNodes how many of them it may hold in all. The compiler's time grows
// with a schema's nesting times its size, and with the square of its
// subschemas past a few thousand (seconds for a 12 KB schema nested 1000
// deep, minutes for 100,000 properties), while a schema is any tenant's
// input: Compile refuses a larger one before compiling it.
// BenchmarkCompileAtLimits measures one at the limits.
const (
	MaxDepth = 48
	MaxNodes = 1024
)

// MaxApplied is the most steps checking one value against one of a
// schema's subschemas may take, counted along every path its references
// lead (counter.most): each subschema applied to the value is a step, as
// is each of its enum values and required names (work). A part reached
// along two paths (a $ref from two places, an allOf naming the same $ref
// twice) counts twice, as the validator runs it twice: thirty $defs, each
// an allOf of two $refs to the next, make a 2 KB schema of 2^32 steps. 16
// times MaxNodes, for schemas that share parts through $ref. What the
// value's properties and items cost is the document's to count (MaxSteps).
// Validating a small value against a schema at the limit takes about
// BenchmarkValidateAtLimit.
const MaxApplied = 16 * MaxNodes

// Schema is a compiled schema, safe for concurrent use.
type Schema struct {
	s    *jsonschema.Schema
	doc  any   // the schema as decoded, to read a failing keyword's siblings
	plan *plan // the fast path for valid documents, or nil (plan.go)
	// count counts a document's subschema applications before the full
	// validator takes it (MaxSteps).
	count *counter
	// not is {"not":{"$ref": the schema}}: the validator checks what is
	// under a "not" for a yes or no, stopping at the first failure and
	// keeping no errors, so it says whether a document is valid at the
	// cost of a valid one (valid).
	not *jsonschema.Schema
}

// refusingLoader is the compiler's URL loader: every load is refused, so a
// schema can only refer inside itself (the metaschemas are embedded in the
// library and never reach a loader).
type refusingLoader struct{}

func (refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %s is not loaded: a binding's schema may only refer inside itself", url)
}

// Compile compiles doc. field names the schema in errors ("input_schema").
// A schema with a reference cycle (refCycle) is refused as one that does
// not compile: it could validate no value that reaches the cycle.
func Compile(field string, doc []byte) (*Schema, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("%s: not valid JSON: %w", field, err)
	}
	switch deep, many := beyond(v, MaxDepth, MaxNodes); {
	case deep:
		return nil, fmt.Errorf("%s: nests objects and arrays more than %d levels deep, the limit", field, MaxDepth)
	case many:
		return nil, fmt.Errorf("%s: has more than %d objects and arrays, the limit: split it, or refer to shared parts with $ref", field, MaxNodes)
	}
	// The schema's own numbers are held to the documents' limits: an
	// enum value, a bound or a multipleOf of a million digits costs every
	// value it meets milliseconds, and its compiling seconds.
	if err := checkNumbers(field, v); err != nil {
		return nil, err
	}
	c := newCompiler()
	loc := "mem:///" + field + ".json"
	if err := c.AddResource(loc, v); err != nil {
		return nil, fmt.Errorf("%s: %s", field, oneLine(err.Error()))
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("%s: does not compile as JSON Schema: %s", field, oneLine(err.Error()))
	}
	anchors := dynamicAnchors(c, loc, v, s)
	if cycle := refCycle(s, anchors); cycle != nil {
		return nil, cycleError(field, loc, cycle)
	}
	notLoc := "mem:///" + field + ".not.json"
	if err := c.AddResource(notLoc, map[string]any{"not": map[string]any{"$ref": loc}}); err != nil {
		return nil, fmt.Errorf("%s: %s", field, oneLine(err.Error()))
	}
	not, err := c.Compile(notLoc)
	if err != nil {
		return nil, fmt.Errorf("%s: does not compile as JSON Schema: %s", field, oneLine(err.Error()))
	}
	count := newCounter(s, anchors)
	if count.most > MaxApplied {
		return nil, fmt.Errorf("%s: checking one value against it would take more than %d steps once its references are followed, the limit "+
			"(each subschema applied is a step, as is each of its enum values and required names; a part reached along n paths, "+
			"through $ref, allOf, anyOf or oneOf, is applied n times): make it smaller, or refer to shared parts from fewer places", field, MaxApplied)
	}
	return &Schema{s: s, doc: v, plan: newPlan(v), count: count, not: not}, nil
}

// beyond reports whether decoded JSON v nests objects and arrays more than
// maxDepth levels deep, or holds more than maxNodes of them (no bound when
// maxNodes is 0). It stops at the first step past either, so its cost is
// bounded by the limits, not by v.
func beyond(v any, maxDepth, maxNodes int) (tooDeep, tooMany bool) {
	type item struct {
		v     any
		depth int
	}
	stack, nodes := []item{{v, 1}}, 0
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		var kids []any
		switch x := it.v.(type) {
		case map[string]any:
			kids = slices.Collect(maps.Values(x))
		case []any:
			kids = x
		default:
			continue
		}
		if it.depth > maxDepth {
			return true, false
		}
		if nodes++; maxNodes > 0 && nodes > maxNodes {
			return false, true
		}
		for _, k := range kids {
			stack = append(stack, item{k, it.depth + 1})
		}
	}
	return false, false
}

// Validate checks the JSON document doc. what names it in errors
// ("arguments", "structured_content"); each failing value is named by its
// JSON pointer (RFC 6901), at most MaxErrors of them:
//
//	arguments: at "/text": maxLength: got 5000, want 4096
//
// A valid document of the common shapes is accepted by the schema's plan
// (plan.go) on its tokens, without the value tree the full validator
// builds; any other goes to the full validator, which decides.
func (s *Schema) Validate(what string, doc []byte) error {
	if len(bytes.TrimSpace(doc)) == 0 {
		return fmt.Errorf("%s: required: must be a JSON value", what)
	}
	if s.plan != nil && s.plan.valid(doc, false) {
		return nil
	}
	return s.full(what, doc, false)
}

// full is the full validator, which decides every document and words
// every failure: the document decoded into a value tree, its numbers held
// to MaxNumberLength and MaxNumberExponent, then jsonschema's Validate.
// object refuses anything but a JSON object first.
func (s *Schema) full(what string, doc []byte, object bool) error {
	v, err := decodeJSON(doc)
	if err != nil {
		return fmt.Errorf("%s: not valid JSON: %w", what, err)
	}
	if _, ok := v.(map[string]any); object && !ok {
		return fmt.Errorf("%s: must be a JSON object", what)
	}
	if err := checkNumbers(what, v); err != nil {
		return err
	}
	if deep, _ := beyond(v, MaxValueDepth, 0); deep {
		return fmt.Errorf("%s: nests objects and arrays more than %d levels deep, the most the validator takes", what, MaxValueDepth)
	}
	steps := s.count.steps(s.s, v, MaxSteps)
	if steps > MaxSteps {
		return fmt.Errorf("%s: checking it would take more than %d steps (each of its values times the subschemas, enum values and required names it meets), "+
			"the most the validator takes: send fewer values", what, MaxSteps)
	}
	// Yes or no first: a valid document is done; the errors of one that
	// fails everywhere would cost ~2 KB a step (a tester's 224 KB held
	// 4.6 GB), so only one within MaxWordSteps is checked again to say
	// where it fails.
	if s.not.Validate(v) != nil {
		return nil
	}
	if steps > MaxWordSteps {
		return fmt.Errorf("%s: does not match the schema; it is too large to say where (checking it takes %d steps, more than the %d within which "+
			"the failures are named): check a smaller part of it against the schema", what, steps, MaxWordSteps)
	}
	return s.validate(what, v)
}

// MaxSteps is the most steps (work) the full validator takes for one
// document (steps): about half a second of CPU here on a valid document
// (~220 ns a subschema applied; an enum value or a required name costs
// less), and up to ~1.3 s and ~400 MB on one that fails everywhere (the
// validator keeps an error with its location for each failing
// application: 3.3 million steps of failures took 2 s and 630 MB). Its
// time is the document's values times the subschemas each one meets, and
// both are the caller's to choose: 10,000 items against an allOf of 1,000
// parts took 2 s, 300,000 would take a minute, and against a schema at
// MaxApplied 10,000 took 40 s. 20,000 rows of a schema as pydantic writes
// it (a $ref'd row, an enum of 250 codes) count 1.5 million.
const MaxSteps = 1 << 21

// MaxWordSteps is the most steps (MaxSteps) a failing document may take
// for its failures to be named: the validator keeps an error, with its
// value's location, for every failing keyword it applies, up to ~2 KB a
// step (~130 MB here); a larger failing document is refused without
// them.
const MaxWordSteps = 1 << 16

// MaxValueDepth is how deeply a document the full validator checks may
// nest objects and arrays. Its time on a failing document grows with the
// square of the depth (8 s for one nested 9990 deep against a recursive
// schema, 1 ms at 100), and arguments are the model's, so a deeper one is
// refused; a valid document of a common shape never gets here (plan.go).
const MaxValueDepth = 256

// MaxNumberLength is the longest number literal a document may hold, in
// characters. The validator compares numbers exactly (as big rationals),
// which costs time quadratic in their length: a megabyte of digits took
// seconds. 400 characters hold any number an IEEE double can tell apart
// and more; RFC 7493 (I-JSON) section 2.2 asks for no more than that.
const MaxNumberLength = 400

// MaxNumberExponent bounds the exponent of a number literal (1e400 and
// 1e-400 pass, 1e401 does not). A number of 400 characters with any
// exponent would still cost the validator a rational of that many digits
// (1e1000000 is a million), and past an IEEE double's range (about 1e308)
// RFC 7493 (I-JSON) section 2.2 says numbers do not interoperate anyway.
const MaxNumberExponent = 400

// checkNumbers refuses a number in v longer than MaxNumberLength or with an
// exponent beyond MaxNumberExponent, naming it by its JSON pointer.
func checkNumbers(what string, v any) error {
	loc, problem := badNumber(v)
	if problem == "" {
		return nil
	}
	slices.Reverse(loc)
	at := jsonPointer(loc)
	if at == "" {
		at = "/"
	}
	return fmt.Errorf("%s: at %s: %s", what, at, problem)
}

// badNumber finds a number in v that checkNumbers refuses and returns why
// and its location, innermost token first. The location is built only for
// the number found, so a document within the limits costs a walk and no
// allocation.
func badNumber(v any) (loc []string, problem string) {
	switch v := v.(type) {
	case json.Number:
		return nil, numberProblem(string(v))
	case map[string]any:
		for k, e := range v {
			if loc, p := badNumber(e); p != "" {
				return append(loc, k), p
			}
		}
	case []any:
		for i, e := range v {
			if loc, p := badNumber(e); p != "" {
				return append(loc, strconv.Itoa(i)), p
			}
		}
	}
	return nil, ""
}

// numberProblem says what is wrong with the number literal n, or "".
func numberProblem(n string) string {
	if len(n) > MaxNumberLength {
		return fmt.Sprintf("number is %d characters long, more than the %d allowed (RFC 7493 I-JSON)", len(n), MaxNumberLength)
	}
	i := strings.IndexAny(n, "eE")
	if i < 0 {
		return ""
	}
	exp, err := strconv.Atoi(strings.TrimPrefix(n[i+1:], "+"))
	if err != nil || exp > MaxNumberExponent || exp < -MaxNumberExponent {
		return fmt.Sprintf("number %s has an exponent beyond ±%d (RFC 7493 I-JSON)", n, MaxNumberExponent)
	}
	return ""
}

// ValidateObject is Validate for a document that must be a JSON object
// whatever the schema says (a tool call's arguments).
func (s *Schema) ValidateObject(what string, doc []byte) error {
	if len(bytes.TrimSpace(doc)) == 0 {
		return fmt.Errorf("%s: required: must be a JSON object", what)
	}
	if s.plan != nil && s.plan.valid(doc, true) {
		return nil
	}
	return s.full(what, doc, true)
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
	// Only the first MaxErrors failing values are worded; the rest are
	// counted. Wording one can cost as much as its enum (kind.Enum lists
	// every value): a tester's 4,000 failing items against an enum of
	// 1,000 long strings took 52 s when each was worded.
	var leaves []string
	failed := 0
	leaf := func(msg func() string) {
		if failed++; len(leaves) < MaxErrors {
			leaves = append(leaves, strictjson.Clip(msg(), maxLeafBytes))
		}
	}
	var walk func(e *jsonschema.ValidationError, at, prefix string)
	walk = func(e *jsonschema.ValidationError, at, prefix string) {
		if at == "" && len(leaves) < MaxErrors {
			at = pointer(e.InstanceLocation)
		}
		if oo, ok := e.ErrorKind.(*kind.OneOf); ok {
			if names := s.requiredChoice(e.SchemaURL); names != nil {
				leaf(func() string { return fmt.Sprintf("at %s: %s", at, choiceMessage(names, oo.Subschemas)) })
				return
			}
		}
		if len(e.Causes) == 0 {
			leaf(func() string { return fmt.Sprintf("at %s: %s%s", at, prefix, kindMessage(e.ErrorKind)) })
			return
		}
		if pn, ok := e.ErrorKind.(*kind.PropertyNames); ok {
			// The causes judge the name, a value with no place in the
			// document: say which name, at the object's place. jsonschema
			// v6.0.3 reports that place wrongly (santhosh-tekuri/jsonschema
			// issue 258: it keeps a buffer a later sibling overwrites), so
			// it is read from the schema's path instead.
			for _, c := range e.Causes {
				walk(c, propertyNamesAt(e.SchemaURL), fmt.Sprintf("property name %s: ", strconv.Quote(pn.Property)))
			}
			return
		}
		for _, c := range e.Causes {
			walk(c, "", prefix)
		}
	}
	walk(ve, "", "")
	extra := ""
	if failed > len(leaves) {
		extra = fmt.Sprintf("; and %d more", failed-len(leaves))
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

// requiredChoice returns the property names when the oneOf of the schema at
// schemaURL is a choice of one property among several, each alternative
// {"required":[name]} alone ("give text or data_base64"), and nil for any
// other oneOf.
func (s *Schema) requiredChoice(schemaURL string) []string {
	node := s.doc
	for _, tok := range fragment(schemaURL) {
		switch n := node.(type) {
		case map[string]any:
			node = n[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n) {
				return nil
			}
			node = n[i]
		default:
			return nil
		}
	}
	obj, _ := node.(map[string]any)
	alts, _ := obj["oneOf"].([]any)
	var names []string
	for _, a := range alts {
		alt, _ := a.(map[string]any)
		req, _ := alt["required"].([]any)
		name, ok := "", len(alt) == 1 && len(req) == 1
		if ok {
			name, ok = req[0].(string)
		}
		if !ok {
			return nil
		}
		names = append(names, name)
	}
	if len(names) < 2 {
		return nil
	}
	return names
}

// choiceMessage says that exactly one of names is wanted, and which of
// them came (matched holds their indexes; none came when it is empty).
func choiceMessage(names []string, matched []int) string {
	want := "give exactly one of " + strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	if len(matched) == 0 {
		return want + " (got none)"
	}
	got := make([]string, len(matched))
	for i, m := range matched {
		got[i] = names[m]
	}
	return want + " (got " + strings.Join(got, " and ") + ")"
}

// propertyNamesAt is the place of the object a propertyNames keyword at
// schemaURL checked, when the schema's path says it: a chain of
// properties/<name> from the root ("#/properties/env/propertyNames" is
// "/env"). Through items, a $ref or the like it cannot be told, and the
// answer is "an object".
func propertyNamesAt(schemaURL string) string {
	toks := fragment(schemaURL)
	if len(toks)%2 == 0 || toks[len(toks)-1] != "propertyNames" {
		return "an object"
	}
	var loc []string
	for i := 0; i < len(toks)-1; i += 2 {
		if toks[i] != "properties" {
			return "an object"
		}
		loc = append(loc, toks[i+1])
	}
	return pointer(loc)
}

// fragment returns the tokens of the JSON pointer in schemaURL's fragment
// ("mem:///s.json#/properties/a~1b" is properties, a/b), percent- and then
// ~-unescaped (RFC 6901 section 6); none for the root.
func fragment(schemaURL string) []string {
	_, frag, _ := strings.Cut(schemaURL, "#")
	if frag == "" {
		return nil
	}
	toks := strings.Split(frag, "/")[1:]
	for i, tok := range toks {
		if u, err := url.PathUnescape(tok); err == nil {
			tok = u
		}
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
	}
	return toks
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

// kindMessage is k's message on one line, in jsonschema's words but with
// numbers as JSON writes them: the English printer writes "3,601" (two
// numbers, to a reader) and 1e6 as "1×10⁰⁶".
func kindMessage(k jsonschema.ErrorKind) string {
	bounds := func(name string, got, want *big.Rat) string {
		return fmt.Sprintf("%s: got %s, want %s", name, ratString(got), ratString(want))
	}
	counts := func(name string, got, want int) string { return fmt.Sprintf("%s: got %d, want %d", name, got, want) }
	switch k := k.(type) {
	case *kind.Minimum:
		return bounds("minimum", k.Got, k.Want)
	case *kind.Maximum:
		return bounds("maximum", k.Got, k.Want)
	case *kind.ExclusiveMinimum:
		return bounds("exclusiveMinimum", k.Got, k.Want)
	case *kind.ExclusiveMaximum:
		return bounds("exclusiveMaximum", k.Got, k.Want)
	case *kind.MultipleOf:
		return bounds("multipleOf", k.Got, k.Want)
	case *kind.MinLength:
		return counts("minLength", k.Got, k.Want)
	case *kind.MaxLength:
		return counts("maxLength", k.Got, k.Want)
	case *kind.MinItems:
		return counts("minItems", k.Got, k.Want)
	case *kind.MaxItems:
		return counts("maxItems", k.Got, k.Want)
	case *kind.MinProperties:
		return counts("minProperties", k.Got, k.Want)
	case *kind.MaxProperties:
		return counts("maxProperties", k.Got, k.Want)
	case *kind.Format:
		// The value is cut short, so that why it is not valid shows.
		if v, ok := k.Got.(string); ok && len(v) > maxFormatEcho {
			cut := *k
			cut.Got = strictjson.Clip(v, maxFormatEcho)
			k = &cut
		}
		return ungroup(oneLine(k.LocalizedString(printer)))
	}
	return ungroup(oneLine(k.LocalizedString(printer)))
}

// ratString writes r in decimal, exactly up to maxExactDigits characters (a
// JSON number's value always has a finite decimal form), and past that as
// %g with 17 significant digits, so that 1e400 is not 401 characters.
func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	var s string
	if r.IsInt() {
		s = r.Num().String()
	} else {
		s = strings.TrimSuffix(strings.TrimRight(r.FloatString(MaxNumberLength+MaxNumberExponent), "0"), ".")
	}
	if len(s) <= maxExactDigits {
		return s
	}
	return new(big.Float).SetPrec(64).SetRat(r).Text('g', 17)
}

// maxFormatEcho is the most bytes of a string a format failure repeats.
const maxFormatEcho = 100

// maxExactDigits is the longest number ratString writes out in full.
const maxExactDigits = 40

// maxLeafBytes is the most bytes of one failure's message: a value the
// document sent (a property name, a string) is cut there with "…"
// (strictjson.Clip), so that the message of a small document stays small.
const maxLeafBytes = 512

// ungroup drops each comma between a digit and exactly three digits,
// outside the single-quoted values jsonschema writes (where a backslash
// escapes the next byte), so that user data keeps its commas.
func ungroup(s string) string {
	digit := func(i int) bool { return i >= 0 && i < len(s) && s[i] >= '0' && s[i] <= '9' }
	var b strings.Builder
	quoted := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quoted && c == '\\' && i+1 < len(s):
			b.WriteByte(c)
			i++
			c = s[i]
		case c == '\'':
			quoted = !quoted
		case !quoted && c == ',' && digit(i-1) && digit(i+1) && digit(i+2) && digit(i+3) && !digit(i+4):
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
