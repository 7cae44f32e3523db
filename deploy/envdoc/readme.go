package envdoc

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/brain-tools/suite/pkg/metrics"
)

// Table renders settings as a Markdown table with the columns variable,
// default and meaning. An empty default is shown as "(none)"; a required
// setting says so in its meaning; | in a cell is escaped, and < outside
// code.
func Table(settings []Setting) string {
	var b strings.Builder
	b.WriteString("| variable | default | meaning |\n| --- | --- | --- |\n")
	for _, s := range settings {
		def := "(none)"
		if s.Default != "" {
			def = code(s.Default)
		}
		meaning := s.Meaning
		var notes []string
		if s.Required {
			notes = append(notes, "required")
		}
		if s.NotEmpty {
			notes = append(notes, "must not be empty")
		}
		if s.Separator != "" {
			sep := "list separated by " + code(s.Separator)
			if s.KeyValSeparator != "" {
				sep += ", key and value by " + code(s.KeyValSeparator)
			}
			notes = append(notes, sep)
		}
		if s.File {
			notes = append(notes, "names a file holding the value")
		}
		if len(notes) > 0 {
			meaning += " (" + strings.Join(notes, "; ") + ")"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", code(s.Name), def, cell(meaning))
	}
	return b.String()
}

// code wraps s in backticks, longer fences when s holds one.
func code(s string) string {
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") || strings.HasPrefix(s, " ") || strings.HasSuffix(s, " ") {
		return fence + " " + pipes(s) + " " + fence
	}
	return fence + pipes(s) + fence
}

// cell escapes text for a table cell: | would end the cell and <...>
// would be read as HTML.
func cell(s string) string { return strings.ReplaceAll(pipes(s), "<", "&lt;") }

func pipes(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// Markers returns the lines that open and close the generated table of a
// service in deploy/README.md.
func Markers(service string) (begin, end string) {
	return "<!-- env:" + service + " begin -->", "<!-- env:" + service + " end -->"
}

// MetricsMarkers are the lines that open and close the metrics table in
// deploy/README.md (metrics.Markdown, from pkg/metrics' catalogue).
const (
	MetricsBegin = "<!-- metrics begin -->"
	MetricsEnd   = "<!-- metrics end -->"
)

// Render returns readme with the text between each service's markers
// replaced by the table of its settings read from repoRoot, the text
// between the metrics markers by the catalogue of metrics
// (metrics.Markdown), and Check(repoRoot) passed. Every service of Services
// must have its markers, once each, begin before end, and so must the
// metrics; text outside the markers is kept as is.
func Render(repoRoot string, readme []byte) ([]byte, error) {
	settings, err := check(repoRoot, Module, Services)
	if err != nil {
		return nil, err
	}
	tables := map[string]string{}
	for name, s := range settings {
		tables[name] = Table(s)
	}
	out, err := Splice(readme, tables)
	if err != nil {
		return nil, err
	}
	return spliceBlock(out, MetricsBegin, MetricsEnd, "the metrics", metrics.Markdown())
}

// Splice replaces the text between the markers of each service in tables
// with its table. A missing, repeated or misordered marker is an error
// naming it.
func Splice(readme []byte, tables map[string]string) ([]byte, error) {
	out := readme
	var errs []error
	for _, name := range Names() {
		table, ok := tables[name]
		if !ok {
			continue
		}
		begin, end := Markers(name)
		spliced, err := spliceBlock(out, begin, end, name, table)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = spliced
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// spliceBlock replaces the text between begin and end (what names the
// block in errors) with text.
func spliceBlock(readme []byte, begin, end, what, text string) ([]byte, error) {
	bi, ei := bytes.Index(readme, []byte(begin)), bytes.Index(readme, []byte(end))
	switch {
	case bi < 0 || ei < 0:
		return nil, fmt.Errorf("envdoc: README has no %q ... %q markers", begin, end)
	case bytes.Count(readme, []byte(begin)) > 1 || bytes.Count(readme, []byte(end)) > 1:
		return nil, fmt.Errorf("envdoc: README has the markers of %s more than once", what)
	case ei < bi:
		return nil, fmt.Errorf("envdoc: README has %q before %q", end, begin)
	}
	var b bytes.Buffer
	b.Write(readme[:bi+len(begin)])
	b.WriteString("\n")
	b.WriteString(text)
	b.Write(readme[ei:])
	return b.Bytes(), nil
}
