// Package envdoc lists the environment settings of each service of the
// suite from the Go source of its Config structs, so the tables in
// deploy/README.md are generated and cannot drift from the code.
//
// It reads source with go/parser (comments included) and never imports a
// service: a Config struct is found by its package directory and type
// name, and the walk follows the rules of github.com/caarlos0/env/v11,
// which every service parses its environment with:
//
//   - a field with an `env:"NAME"` tag is one setting; options after the
//     name (required, notEmpty, file, expand, unset, init) are recorded;
//     `env:"-"` is ignored;
//   - an unexported field is ignored (env cannot set it);
//   - a field (embedded or named) whose type is a struct declared in this
//     repository is walked into, its names prefixed with the field's
//     envPrefix tag added to the parent's prefix; a pointer to a struct
//     only with the init option, as env leaves nil pointers alone;
//   - envDefault, envSeparator and envKeyValSeparator are copied as
//     written.
//
// Every setting must carry a doc comment (or a line comment): it becomes
// the Meaning column. Check refuses a struct with env tags in a service's
// directory (or in pkg/) that no service's roots reach, so a new Config
// struct cannot be forgotten.
package envdoc

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Module is the import path of the repository root: an import path under
// it is read from the directory of the same relative path.
const Module = "github.com/brain-tools/suite"

// Setting is one environment variable a service reads.
type Setting struct {
	// Name is the variable, with every envPrefix applied.
	Name string
	// Default is the envDefault tag as written, or the Spec's Defaults
	// entry for a default set in code; "" when there is none.
	Default string
	// Meaning is the field's doc comment on one line, with the field name
	// and "(env NAME)" mentions taken out.
	Meaning string
	// Type is the field's Go type as written, e.g. time.Duration, []string.
	Type string
	// Separator and KeyValSeparator are envSeparator and
	// envKeyValSeparator, for slices and maps.
	Separator, KeyValSeparator string
	// Required, NotEmpty, File, Expand and Unset are the env tag options.
	Required, NotEmpty, File, Expand, Unset bool
	// Field is the Go path from the root, e.g. Config.Service.Addr.
	Field string
	// Pos is where the field is declared, path relative to the repository
	// root and line, e.g. pkg/service/config.go:21.
	Pos string
}

// Root is a struct a service parses its environment into.
type Root struct {
	// Dir is the package directory, relative to the repository root.
	Dir string
	// Type is the struct's type name in that package.
	Type string
}

// Spec says where a service's settings come from.
type Spec struct {
	// Name is the service, as in services/<Name>.
	Name string
	// Roots are the structs the service hands to env, in order.
	Roots []Root
	// Defaults are defaults the service sets in code after parsing (ADDR's
	// port); each value must appear as a string literal in the service's
	// source, or Service fails.
	Defaults map[string]string
}

// Services is the table of every service's roots, in the README's order.
var Services = []Spec{
	{Name: "brain", Roots: []Root{{"services/brain", "envConfig"}}},
	{Name: "local", Roots: []Root{{"services/local", "Config"}, process},
		Defaults: map[string]string{"ADDR": "127.0.0.1:8081"}},
	{Name: "sandbox", Roots: []Root{{"services/sandbox/internal/app", "Config"}, process},
		Defaults: map[string]string{"ADDR": "127.0.0.1:8082"}},
	{Name: "storage", Roots: []Root{{"services/storage", "Config"}, process},
		Defaults: map[string]string{"ADDR": "127.0.0.1:8083"}},
	{Name: "search", Roots: []Root{{"services/search", "Config"}, process},
		Defaults: map[string]string{"ADDR": "127.0.0.1:8084"}},
	{Name: "webfetch", Roots: []Root{{"services/webfetch/internal/webfetch", "Config"}, process},
		Defaults: map[string]string{"ADDR": "127.0.0.1:8085"}},
	{Name: "browser", Roots: []Root{{"services/browser/internal/app", "Config"}, process},
		Defaults: map[string]string{"ADDR": "127.0.0.1:8086"}},
}

// process is what pkg/service.Main reads of every tool service's
// environment itself (LOG_LEVEL).
var process = Root{"pkg/service", "Process"}

// Names lists the services of Services in order.
func Names() []string {
	names := make([]string, len(Services))
	for i, s := range Services {
		names[i] = s.Name
	}
	return names
}

// Lookup returns the Spec of the named service.
func Lookup(name string) (Spec, bool) {
	for _, s := range Services {
		if s.Name == name {
			return s, true
		}
	}
	return Spec{}, false
}

// Service lists the settings of the named service, read from the source
// under repoRoot, in declaration order. Errors: an unknown service, a
// root or field type that cannot be found, a setting without a doc
// comment, a name declared twice, a code default not found in the source.
func Service(repoRoot, name string) ([]Setting, error) {
	spec, ok := Lookup(name)
	if !ok {
		return nil, fmt.Errorf("envdoc: unknown service %q (want one of %s)", name, strings.Join(Names(), ", "))
	}
	w := newWalker(repoRoot, Module)
	return w.service(spec)
}

// Check lists every service's settings and then fails for each struct
// with env tags that no roots reach: one under services/<name>/ that the
// service's own roots do not reach, or one under pkg/ that no service
// reaches. The errors are joined.
func Check(repoRoot string) error {
	_, err := check(repoRoot, Module, Services)
	return err
}

// check is Check over specs, also returning each service's settings (by
// name), so Render need not parse the source again.
func check(repoRoot, module string, specs []Spec) (map[string][]Setting, error) {
	w := newWalker(repoRoot, module)
	var errs []error
	settings := map[string][]Setting{}
	reachedBy := map[typeKey][]string{}
	for _, spec := range specs {
		w.reached = map[typeKey]bool{}
		s, err := w.service(spec)
		if err != nil {
			errs = append(errs, err)
		}
		settings[spec.Name] = s
		for k := range w.reached {
			reachedBy[k] = append(reachedBy[k], spec.Name)
		}
	}
	tagged, err := w.taggedStructs()
	if err != nil {
		return nil, errors.Join(append(errs, err)...)
	}
	for _, k := range tagged {
		owner := ""
		if rest, ok := strings.CutPrefix(k.dir, "services/"); ok {
			owner, _, _ = strings.Cut(rest, "/")
		}
		users := reachedBy[k]
		switch {
		case owner != "" && !slices.Contains(users, owner):
			errs = append(errs, fmt.Errorf("envdoc: %s.%s has env tags but no root of service %q reaches it: add it to envdoc.Services", k.dir, k.name, owner))
		case owner == "" && len(users) == 0:
			errs = append(errs, fmt.Errorf("envdoc: %s.%s has env tags but no service's roots reach it: add it to envdoc.Services", k.dir, k.name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return settings, nil
}

// typeKey names a type: package directory (relative, slash-separated) and
// type name.
type typeKey struct{ dir, name string }

// pkgSource is one parsed package directory.
type pkgSource struct {
	fset    *token.FileSet
	structs map[string]*structDecl
	strs    map[string]bool // every string literal's value
}

type structDecl struct {
	st      *ast.StructType
	imports map[string]string // local name → import path
}

type walker struct {
	root, module string
	pkgs         map[string]*pkgSource
	reached      map[typeKey]bool
}

func newWalker(root, module string) *walker {
	return &walker{root: root, module: module, pkgs: map[string]*pkgSource{}, reached: map[typeKey]bool{}}
}

// load parses the non-test Go files of dir (relative to the root).
func (w *walker) load(dir string) (*pkgSource, error) {
	if p, ok := w.pkgs[dir]; ok {
		return p, nil
	}
	abs := filepath.Join(w.root, filepath.FromSlash(dir))
	entries, err := os.ReadDir(abs)
	if err != nil {
		return nil, fmt.Errorf("envdoc: read package %s: %w", dir, err)
	}
	p := &pkgSource{fset: token.NewFileSet(), structs: map[string]*structDecl{}, strs: map[string]bool{}}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(p.fset, filepath.Join(abs, n), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("envdoc: parse %s/%s: %w", dir, n, err)
		}
		imports := map[string]string{}
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			local := path[strings.LastIndex(path, "/")+1:]
			if m := majorSuffix.FindString(local); m != "" {
				// github.com/x/env/v11 is package env.
				trimmed := strings.TrimSuffix(path, "/"+m)
				local = trimmed[strings.LastIndex(trimmed, "/")+1:]
			}
			if im.Name != nil {
				local = im.Name.Name
			}
			imports[local] = path
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.TypeSpec:
				if st, ok := n.Type.(*ast.StructType); ok {
					p.structs[n.Name.Name] = &structDecl{st: st, imports: imports}
				}
			case *ast.BasicLit:
				if n.Kind == token.STRING {
					if s, err := strconv.Unquote(n.Value); err == nil {
						p.strs[s] = true
					}
				}
			}
			return true
		})
	}
	w.pkgs[dir] = p
	return p, nil
}

func (w *walker) service(spec Spec) ([]Setting, error) {
	var out []Setting
	var errs []error
	for _, r := range spec.Roots {
		s, err := w.walk(typeKey{r.Dir, r.Type}, "", r.Type, nil)
		errs = append(errs, err)
		out = append(out, s...)
	}
	seen := map[string]string{}
	for i, s := range out {
		if prev, dup := seen[s.Name]; dup {
			errs = append(errs, fmt.Errorf("envdoc: %s: %s declared twice (%s and %s)", spec.Name, s.Name, prev, s.Pos))
		}
		seen[s.Name] = s.Pos
		if d, ok := spec.Defaults[s.Name]; ok {
			if s.Default != "" {
				errs = append(errs, fmt.Errorf("envdoc: %s: %s has envDefault %q and a code default %q", spec.Name, s.Name, s.Default, d))
			}
			out[i].Default = d
		}
	}
	for name, d := range spec.Defaults {
		if _, ok := seen[name]; !ok {
			errs = append(errs, fmt.Errorf("envdoc: %s: code default for %s, which no root declares", spec.Name, name))
			continue
		}
		found, err := w.literalIn("services/"+spec.Name, d)
		errs = append(errs, err)
		if err == nil && !found {
			errs = append(errs, fmt.Errorf("envdoc: %s: code default %s=%q is not a string literal anywhere under services/%s: update envdoc.Services", spec.Name, name, d, spec.Name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// walk lists the settings of struct k, names prefixed with prefix, field
// paths starting at path. stack holds the structs being walked, to refuse
// a cycle.
func (w *walker) walk(k typeKey, prefix, path string, stack []typeKey) ([]Setting, error) {
	if slices.Contains(stack, k) {
		return nil, fmt.Errorf("envdoc: %s: struct cycle through %s.%s", path, k.dir, k.name)
	}
	p, err := w.load(k.dir)
	if err != nil {
		return nil, err
	}
	sd, ok := p.structs[k.name]
	if !ok {
		return nil, fmt.Errorf("envdoc: %s: no struct type %s in %s", path, k.name, k.dir)
	}
	w.reached[k] = true
	stack = append(stack, k)
	var out []Setting
	var errs []error
	for _, f := range sd.st.Fields.List {
		tag := reflect.StructTag("")
		if f.Tag != nil {
			s, _ := strconv.Unquote(f.Tag.Value)
			tag = reflect.StructTag(s)
		}
		names := make([]string, 0, len(f.Names))
		for _, n := range f.Names {
			names = append(names, n.Name)
		}
		if len(names) == 0 { // embedded: the type's name
			names = []string{typeName(f.Type)}
		}
		for _, fname := range names {
			if !ast.IsExported(fname) {
				continue
			}
			fpath := path + "." + fname
			pos := w.pos(p, f)
			envTag, hasEnv := tag.Lookup("env")
			opts := strings.Split(envTag, ",")
			if hasEnv && opts[0] == "-" {
				continue
			}
			if hasEnv && opts[0] != "" {
				s := Setting{
					Name:            prefix + opts[0],
					Default:         tag.Get("envDefault"),
					Type:            types.ExprString(f.Type),
					Separator:       tag.Get("envSeparator"),
					KeyValSeparator: tag.Get("envKeyValSeparator"),
					Field:           fpath,
					Pos:             pos,
				}
				for _, o := range opts[1:] {
					switch o {
					case "required":
						s.Required = true
					case "notEmpty":
						s.NotEmpty = true
					case "file":
						s.File = true
					case "expand":
						s.Expand = true
					case "unset":
						s.Unset = true
					}
				}
				doc := f.Doc
				if doc == nil {
					doc = f.Comment
				}
				if doc == nil || strings.TrimSpace(doc.Text()) == "" {
					errs = append(errs, fmt.Errorf("envdoc: %s: %s (env %s) has no doc comment: every setting needs one, it is the README's meaning column", pos, fpath, s.Name))
					continue
				}
				s.Meaning = Condense(doc.Text(), fname, opts[0])
				out = append(out, s)
				continue
			}
			// No env name: walk into a struct of this repository.
			expr := f.Type
			if star, ok := expr.(*ast.StarExpr); ok {
				if !slices.Contains(opts, "init") {
					continue
				}
				expr = star.X
			}
			sub, ok := w.resolve(k.dir, sd.imports, expr)
			if !ok {
				continue
			}
			sp, err := w.load(sub.dir)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if _, isStruct := sp.structs[sub.name]; !isStruct {
				continue
			}
			s, err := w.walk(sub, prefix+tag.Get("envPrefix"), fpath, stack)
			errs = append(errs, err)
			out = append(out, s...)
		}
	}
	return out, errors.Join(errs...)
}

// resolve finds the package directory of a named type expression: an
// identifier of dir's package, or pkg.Name with pkg imported from under
// the module. Other types (builtin, standard library, third party) are
// not walked.
func (w *walker) resolve(dir string, imports map[string]string, expr ast.Expr) (typeKey, bool) {
	switch t := expr.(type) {
	case *ast.Ident:
		if types.Universe.Lookup(t.Name) != nil {
			return typeKey{}, false
		}
		return typeKey{dir, t.Name}, true
	case *ast.SelectorExpr:
		id, ok := t.X.(*ast.Ident)
		if !ok {
			return typeKey{}, false
		}
		path, ok := imports[id.Name]
		if !ok {
			return typeKey{}, false
		}
		rel, ok := strings.CutPrefix(path, w.module+"/")
		if !ok {
			return typeKey{}, false
		}
		return typeKey{rel, t.Sel.Name}, true
	}
	return typeKey{}, false
}

func typeName(expr ast.Expr) string {
	switch t := expr.(type) {
	case *ast.StarExpr:
		return typeName(t.X)
	case *ast.Ident:
		return t.Name
	case *ast.SelectorExpr:
		return t.Sel.Name
	case *ast.IndexExpr:
		return typeName(t.X)
	}
	return ""
}

func (w *walker) pos(p *pkgSource, f *ast.Field) string {
	pos := p.fset.Position(f.Pos())
	rel, err := filepath.Rel(w.root, pos.Filename)
	if err != nil {
		rel = pos.Filename
	}
	return fmt.Sprintf("%s:%d", filepath.ToSlash(rel), pos.Line)
}

// literalIn reports whether s is a string literal in a non-test Go file
// under dir.
func (w *walker) literalIn(dir, s string) (bool, error) {
	dirs, err := w.goDirs(dir)
	if err != nil {
		return false, err
	}
	for _, d := range dirs {
		p, err := w.load(d)
		if err != nil {
			return false, err
		}
		if p.strs[s] {
			return true, nil
		}
	}
	return false, nil
}

// goDirs lists the directories under dir (relative) holding Go files,
// skipping testdata and hidden directories.
func (w *walker) goDirs(dir string) ([]string, error) {
	var dirs []string
	base := filepath.Join(w.root, filepath.FromSlash(dir))
	err := filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		n := d.Name()
		if path != base && (n == "testdata" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
			return filepath.SkipDir
		}
		matches, _ := filepath.Glob(filepath.Join(path, "*.go"))
		if len(matches) > 0 {
			rel, _ := filepath.Rel(w.root, path)
			dirs = append(dirs, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("envdoc: walk %s: %w", dir, err)
	}
	return dirs, nil
}

// taggedStructs lists every struct with a direct env tag under services/
// and pkg/, sorted.
func (w *walker) taggedStructs() ([]typeKey, error) {
	var out []typeKey
	for _, top := range []string{"services", "pkg"} {
		if _, err := os.Stat(filepath.Join(w.root, top)); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		dirs, err := w.goDirs(top)
		if err != nil {
			return nil, err
		}
		for _, d := range dirs {
			p, err := w.load(d)
			if err != nil {
				return nil, err
			}
			for name, sd := range p.structs {
				if hasEnvTag(sd.st) {
					out = append(out, typeKey{d, name})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].dir != out[j].dir {
			return out[i].dir < out[j].dir
		}
		return out[i].name < out[j].name
	})
	return out, nil
}

func hasEnvTag(st *ast.StructType) bool {
	for _, f := range st.Fields.List {
		if f.Tag == nil {
			continue
		}
		s, _ := strconv.Unquote(f.Tag.Value)
		if _, ok := reflect.StructTag(s).Lookup("env"); ok {
			return true
		}
	}
	return false
}

var (
	spaces      = regexp.MustCompile(`\s+`)
	emptyParens = regexp.MustCompile(`\s*\(\s*\)`)
	majorSuffix = regexp.MustCompile(`^v[0-9]+$`)
)

// Condense turns a field's doc comment into one line for a table cell:
// whitespace collapsed, a leading "Field is"/"Field are"/"Field," dropped
// (the table names the variable), mentions of the variable itself, like
// "(env NAME)" or "(NAME)", removed. Case is kept: "debug, info, warn
// or error" stays lower-case, as the values are.
func Condense(doc, field, name string) string {
	s := strings.TrimSpace(spaces.ReplaceAllString(doc, " "))
	q := regexp.QuoteMeta(name)
	s = regexp.MustCompile(`\(\s*(env\s+)?`+q+`=([^)\s]+)\s*\)`).ReplaceAllString(s, "(set to $2)")
	s = regexp.MustCompile(`\(\s*(env\s+)?`+q+`\s*\)`).ReplaceAllString(s, "()")
	s = regexp.MustCompile(`\(\s*(env\s+)?`+q+`\s*[,;]\s*`).ReplaceAllString(s, "(")
	s = emptyParens.ReplaceAllString(s, "")
	if rest, ok := strings.CutPrefix(s, field+" "); ok {
		for _, verb := range []string{"is ", "are "} {
			if r, ok := strings.CutPrefix(rest, verb); ok {
				rest = r
				break
			}
		}
		s = rest
	} else if rest, ok := strings.CutPrefix(s, field+", "); ok {
		s = rest
	}
	return strings.TrimSpace(s)
}
