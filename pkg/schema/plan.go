package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"regexp"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// A plan is the fast path of a Schema: the common shapes of a tool's
// schemas (objects of typed properties with lengths, bounds, enums,
// patterns, formats and required names; arrays of them; maps and their
// property names; the "give exactly one of a or b" oneOf), compiled once, checked straight on
// the document's tokens with no value tree built. It answers only "the
// document is valid"; anything else — a failure, or something it does not
// decide exactly (a number with a fraction against a bound, invalid UTF-8,
// a duplicate name) — sends the document to the full validator, which
// decides and words the error. So the plan must never accept a document the
// full validator refuses; it may send a valid one on (TestPlanAgrees and
// FuzzPlan hold it to that).
//
// A schema that uses any keyword outside the subset (a $ref, allOf,
// multipleOf, uniqueItems, ...) has no plan, and every document goes to
// the full validator.
type plan struct {
	root *node
}

// node is one schema of the subset. A nil *node accepts any value.
type node struct {
	types typeSet // 0: any type

	// strings
	minLen, maxLen int // -1: no bound
	pattern        *regexp.Regexp
	patternCost    int                // byteCost of pattern: 32 an instruction (regexCost)
	format         *jsonschema.Schema // {"type":"string","format":F}, or nil
	formatCost     int                // byteCost of format
	enum           map[string]bool    // nil: no enum; only enums of strings have a plan

	// numbers, as integers: a bound that is not an integer has no plan
	min, max     *int64
	exMin, exMax *int64

	// objects
	props      map[string]int // name → bit in the seen mask; under len(children), a property
	children   []*node        // the properties' schemas
	required   uint64         // a mask of props' bits
	closed     bool           // additionalProperties: false
	additional *node          // additionalProperties: a schema (nil: any value)
	choice     []int          // oneOf of {"required":[name]} alone: exactly one of these props
	names      *node          // propertyNames: every name is a string checked against it

	// arrays
	items              *node
	minItems, maxItems int // -1: no bound
}

// typeSet is a set of JSON Schema types.
type typeSet uint8

const (
	tNull typeSet = 1 << iota
	tBoolean
	tObject
	tArray
	tNumber
	tInteger
	tString
)

var typeNames = map[string]typeSet{
	"null": tNull, "boolean": tBoolean, "object": tObject, "array": tArray,
	"number": tNumber, "integer": tInteger, "string": tString,
}

// annotations are the keywords that never change whether a document is
// valid (contentEncoding and contentMediaType are asserted only with
// AssertContent, which Compile does not set).
var annotations = map[string]bool{
	"description": true, "title": true, "default": true, "examples": true, "$comment": true,
	"deprecated": true, "readOnly": true, "writeOnly": true, "contentEncoding": true, "contentMediaType": true,
}

// draft2020 is the only $schema a plan is made for: the keywords of the
// subset mean something else in older drafts (draft 4's boolean
// exclusiveMaximum).
const draft2020 = "https://json-schema.org/draft/2020-12/schema"

// errNoPlan says a schema is outside the subset.
var errNoPlan = errors.New("no plan")

// newPlan builds the plan of the decoded schema doc, or nil when doc is
// outside the subset.
func newPlan(doc any) *plan {
	if m, ok := doc.(map[string]any); ok {
		if s, ok := m["$schema"]; ok && s != draft2020 {
			return nil
		}
	}
	n, err := planNode(doc, true)
	if err != nil {
		return nil
	}
	return &plan{root: n}
}

func planNode(doc any, root bool) (*node, error) {
	if b, ok := doc.(bool); ok {
		if b {
			return nil, nil
		}
		return nil, errNoPlan // false: rare enough for the full validator
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, errNoPlan
	}
	n := &node{minLen: -1, maxLen: -1, minItems: -1, maxItems: -1}
	var err error
	for k, v := range m {
		switch {
		case annotations[k], root && k == "$schema":
		case k == "type":
			err = n.setTypes(v)
		case k == "minLength":
			n.minLen, err = count(v)
		case k == "maxLength":
			n.maxLen, err = count(v)
		case k == "minItems":
			n.minItems, err = count(v)
		case k == "maxItems":
			n.maxItems, err = count(v)
		case k == "pattern":
			s, ok := v.(string)
			if !ok {
				return nil, errNoPlan
			}
			// The full validator's engine is Go's regexp too, matching
			// anywhere in the string.
			if n.pattern, err = regexp.Compile(s); err != nil {
				return nil, errNoPlan
			}
			n.patternCost = 32 * regexCost(s)
		case k == "format":
			s, ok := v.(string)
			if !ok {
				return nil, errNoPlan
			}
			if n.format, err = formatSchema(s); err == nil {
				n.formatCost = byteCost(n.format)
			}
		case k == "enum":
			n.enum, err = stringEnum(v)
		case k == "minimum":
			n.min, err = integer(v)
		case k == "maximum":
			n.max, err = integer(v)
		case k == "exclusiveMinimum":
			n.exMin, err = integer(v)
		case k == "exclusiveMaximum":
			n.exMax, err = integer(v)
		case k == "propertyNames":
			if n.names, err = planNode(v, false); err == nil && n.names == nil {
				n.names = &node{minLen: -1, maxLen: -1, minItems: -1, maxItems: -1}
			}
		case k == "properties", k == "required", k == "additionalProperties", k == "oneOf":
			// below, once properties are known
		case k == "items":
			n.items, err = planNode(v, false)
		default:
			return nil, errNoPlan
		}
		if err != nil {
			return nil, errNoPlan
		}
	}
	if err := n.setObject(m); err != nil {
		return nil, err
	}
	return n, nil
}

func (n *node) setTypes(v any) error {
	add := func(v any) error {
		s, _ := v.(string)
		t, ok := typeNames[s]
		if !ok {
			return errNoPlan
		}
		n.types |= t
		return nil
	}
	if a, ok := v.([]any); ok {
		if len(a) == 0 {
			return errNoPlan
		}
		for _, e := range a {
			if err := add(e); err != nil {
				return err
			}
		}
		return nil
	}
	return add(v)
}

func (n *node) setObject(m map[string]any) error {
	if p, ok := m["properties"]; ok {
		pm, ok := p.(map[string]any)
		if !ok || len(pm) > 64 {
			return errNoPlan
		}
		n.props = make(map[string]int, len(pm))
		for name, ps := range pm {
			c, err := planNode(ps, false)
			if err != nil {
				return err
			}
			n.props[name] = len(n.children)
			n.children = append(n.children, c)
		}
	}
	index := func(name any) (int, error) {
		s, ok := name.(string)
		if !ok {
			return 0, errNoPlan
		}
		i, ok := n.props[s]
		if !ok {
			// A required name that is not a property: it gets a bit of
			// the mask, and additionalProperties judges its value.
			if len(n.props) == 64 {
				return 0, errNoPlan
			}
			if n.props == nil {
				n.props = map[string]int{}
			}
			i = len(n.props)
			n.props[s] = i
		}
		return i, nil
	}
	if r, ok := m["required"]; ok {
		ra, ok := r.([]any)
		if !ok {
			return errNoPlan
		}
		for _, name := range ra {
			i, err := index(name)
			if err != nil {
				return err
			}
			n.required |= 1 << i
		}
	}
	if o, ok := m["oneOf"]; ok {
		alts, ok := o.([]any)
		if !ok || len(alts) < 2 {
			return errNoPlan
		}
		for _, a := range alts {
			am, ok := a.(map[string]any)
			req, _ := am["required"].([]any)
			if !ok || len(am) != 1 || len(req) != 1 {
				return errNoPlan
			}
			i, err := index(req[0])
			if err != nil {
				return err
			}
			n.choice = append(n.choice, i)
		}
	}
	if a, ok := m["additionalProperties"]; ok {
		if b, ok := a.(bool); ok {
			n.closed = !b
		} else {
			c, err := planNode(a, false)
			if err != nil {
				return err
			}
			n.additional = c
		}
	}
	return nil
}

// count reads a non-negative integer keyword value (minLength, maxItems).
func count(v any) (int, error) {
	p, err := integer(v)
	if err != nil || *p < 0 || *p > math.MaxInt32 {
		return 0, errNoPlan
	}
	return int(*p), nil
}

// integer reads a keyword value that is an integer literal (a bound).
func integer(v any) (*int64, error) {
	num, ok := v.(json.Number)
	if !ok {
		return nil, errNoPlan
	}
	i, ok := parseInt([]byte(num))
	if !ok {
		return nil, errNoPlan
	}
	return &i, nil
}

func stringEnum(v any) (map[string]bool, error) {
	a, ok := v.([]any)
	if !ok || len(a) == 0 {
		return nil, errNoPlan
	}
	out := make(map[string]bool, len(a))
	for _, e := range a {
		s, ok := e.(string)
		if !ok {
			return nil, errNoPlan
		}
		out[s] = true
	}
	return out, nil
}

// formatSchema compiles {"type":"string","format":name} as Compile does,
// so that a string with a format is judged by the full validator's own
// format check (and only the string, not the document).
func formatSchema(name string) (*jsonschema.Schema, error) {
	c := newCompiler()
	if err := c.AddResource("mem:///format.json", map[string]any{"type": "string", "format": name}); err != nil {
		return nil, errNoPlan
	}
	s, err := c.Compile("mem:///format.json")
	if err != nil {
		return nil, errNoPlan
	}
	return s, nil
}

// decoders are the plan's token readers, reused: a check allocates
// nothing for a document of short strings without escapes.
var decoders = sync.Pool{New: func() any { return new(planDecoder) }}

type planDecoder struct {
	buf     bytes.Buffer
	dec     jsontext.Decoder
	scratch []byte // unquoted strings with escapes
	// budget is the steps left for patterns and formats (MaxSteps a
	// document, as the full validator's count): past it the plan stops
	// and the full path refuses the document.
	budget int
}

// valid reports whether the plan accepts doc, read as one JSON value
// (object when object is set). false means "ask the full validator".
func (p *plan) valid(doc []byte, object bool) bool {
	d := decoders.Get().(*planDecoder)
	d.buf = *bytes.NewBuffer(doc)
	d.dec.Reset(&d.buf)
	d.budget = MaxSteps
	ok := (!object || d.dec.PeekKind() == '{') && d.value(p.root)
	if ok {
		_, err := d.dec.ReadToken()
		ok = errors.Is(err, io.EOF)
	}
	d.buf = bytes.Buffer{}
	d.dec.Reset(&d.buf) // drop the reference to doc
	if cap(d.scratch) > 64<<10 {
		d.scratch = nil
	}
	decoders.Put(d)
	return ok
}

// value checks the next value against n (nil: any value, whose numbers
// are still held to MaxNumberLength and MaxNumberExponent).
func (d *planDecoder) value(n *node) bool {
	kind := d.dec.PeekKind()
	if n != nil && n.enum != nil && kind != '"' {
		return false
	}
	switch kind {
	case 'n':
		_, err := d.dec.ReadToken()
		return err == nil && n.allows(tNull)
	case 't', 'f':
		_, err := d.dec.ReadToken()
		return err == nil && n.allows(tBoolean)
	case '"':
		return d.str(n)
	case '0':
		return d.number(n)
	case '{', '[':
		// Deeper than the full validator takes: it decides (refuses).
		if d.dec.StackDepth() >= MaxValueDepth {
			return false
		}
		if kind == '{' {
			return d.object(n)
		}
		return d.array(n)
	}
	return false
}

func (n *node) allows(t typeSet) bool { return n == nil || n.types == 0 || n.types&t != 0 }

// strValue reads a string value (or name) and returns its unquoted bytes,
// valid until the next read.
func (d *planDecoder) strValue() ([]byte, bool) {
	v, err := d.dec.ReadValue()
	if err != nil || len(v) < 2 || v[0] != '"' {
		return nil, false
	}
	raw := v[1 : len(v)-1]
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw, true
	}
	d.scratch, err = jsontext.AppendUnquote(d.scratch[:0], v)
	return d.scratch, err == nil
}

func (d *planDecoder) str(n *node) bool {
	s, ok := d.strValue()
	return ok && n.validString(s, &d.budget)
}

// validString checks the string s (a value, or a name under
// propertyNames) against n, its pattern and format paid from budget.
func (n *node) validString(s []byte, budget *int) bool {
	if !n.allows(tString) || n != nil && n.enum != nil && !n.inEnum(s) {
		return false
	}
	if n == nil {
		return true
	}
	if n.minLen >= 0 || n.maxLen >= 0 {
		c := utf8.RuneCount(s)
		if n.minLen >= 0 && c < n.minLen || n.maxLen >= 0 && c > n.maxLen {
			return false
		}
	}
	if n.pattern != nil {
		if *budget -= stringWork(len(s), n.patternCost); *budget < 0 || !n.pattern.Match(s) {
			return false
		}
	}
	if n.format != nil {
		if *budget -= stringWork(len(s), n.formatCost); *budget < 0 || n.format.Validate(string(s)) != nil {
			return false
		}
	}
	return true
}

// inEnum looks s up in the enum's set: a long enum (a tester's had
// 10,000 values) costs each string one lookup, not a scan.
func (n *node) inEnum(s []byte) bool { return n.enum[string(s)] }

func (d *planDecoder) number(n *node) bool {
	v, err := d.dec.ReadValue()
	if err != nil || !numberWithinLimits(v) {
		return false
	}
	i, isInt := parseInt(v)
	switch {
	case n.allows(tNumber):
	case isInt && n.allows(tInteger):
	default:
		return false // not a number here, or 1.0 against integer: the full validator decides
	}
	if n == nil || n.min == nil && n.max == nil && n.exMin == nil && n.exMax == nil {
		return true
	}
	if !isInt {
		return false // a fraction or an exponent against a bound: compared exactly by the full validator
	}
	return (n.min == nil || i >= *n.min) && (n.max == nil || i <= *n.max) &&
		(n.exMin == nil || i > *n.exMin) && (n.exMax == nil || i < *n.exMax)
}

func (d *planDecoder) object(n *node) bool {
	if _, err := d.dec.ReadToken(); err != nil || !n.allows(tObject) {
		return false
	}
	var seen uint64
	for d.dec.PeekKind() != '}' {
		name, ok := d.strValue()
		if !ok {
			return false
		}
		var child *node
		if n != nil && n.names != nil && !n.names.validString(name, &d.budget) {
			return false
		}
		if n != nil {
			i, named := n.props[string(name)]
			if named {
				seen |= 1 << i
			}
			switch {
			case named && i < len(n.children):
				child = n.children[i]
			case n.closed:
				return false
			default:
				child = n.additional
			}
		}
		if !d.value(child) {
			return false
		}
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return false
	}
	if n == nil {
		return true
	}
	if seen&n.required != n.required {
		return false
	}
	if n.choice != nil {
		got := 0
		for _, i := range n.choice {
			if seen&(1<<i) != 0 {
				got++
			}
		}
		if got != 1 {
			return false
		}
	}
	return true
}

func (d *planDecoder) array(n *node) bool {
	if _, err := d.dec.ReadToken(); err != nil || !n.allows(tArray) {
		return false
	}
	var items *node
	if n != nil {
		items = n.items
	}
	count := 0
	for d.dec.PeekKind() != ']' {
		if !d.value(items) {
			return false
		}
		count++
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return false
	}
	return n == nil || (n.minItems < 0 || count >= n.minItems) && (n.maxItems < 0 || count <= n.maxItems)
}

// parseInt reads a JSON number literal that is a plain integer (no
// fraction, no exponent) of at most 18 digits.
func parseInt(v []byte) (int64, bool) {
	neg := len(v) > 0 && v[0] == '-'
	if neg {
		v = v[1:]
	}
	if len(v) == 0 || len(v) > 18 || len(v) > 1 && v[0] == '0' {
		return 0, false
	}
	var i int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		i = i*10 + int64(c-'0')
	}
	if neg {
		i = -i
	}
	return i, true
}

// numberWithinLimits is numberProblem's "" for a literal: at most
// MaxNumberLength characters, an exponent within ±MaxNumberExponent.
func numberWithinLimits(v []byte) bool {
	if len(v) > MaxNumberLength {
		return false
	}
	i := bytes.IndexAny(v, "eE")
	if i < 0 {
		return true
	}
	exp := v[i+1:]
	if len(exp) > 0 && (exp[0] == '+' || exp[0] == '-') {
		exp = exp[1:]
	}
	if len(exp) == 0 || len(exp) > 3 {
		// 0000001 is a valid exponent of 1 that strconv would read; rare:
		// the full path judges it.
		return false
	}
	e, err := strconv.Atoi(string(exp))
	return err == nil && e <= MaxNumberExponent
}
