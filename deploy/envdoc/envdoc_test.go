package envdoc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const fixModule = "example.com/fix"

// writeTree writes files (slash paths relative to a temp dir) and returns
// the dir.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const sharedPkg = `package shared

import "time"

// Config is shared.
type Config struct {
	// Addr is the listen address (env ADDR).
	Addr string ` + "`env:\"ADDR\"`" + `
	// Wait is how long to wait (env WAIT, default 5s).
	Wait time.Duration ` + "`env:\"WAIT\" envDefault:\"5s\"`" + `
	hidden string ` + "`env:\"HIDDEN\"`" + `
}
`

func TestService(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		spec    Spec
		want    []Setting
		wantErr string
	}{
		{
			name: "embedded struct from another package, own fields, options",
			files: map[string]string{
				"pkg/shared/shared.go": sharedPkg,
				"services/a/main.go": `package main

import "example.com/fix/pkg/shared"

// Config is a's.
type Config struct {
	shared.Config
	// Tags are the tags (env A_TAGS), comma-separated.
	Tags []string ` + "`env:\"A_TAGS\" envSeparator:\",\" envDefault:\"x,y\"`" + `
	// Key is the key.
	Key string ` + "`env:\"A_KEY,required,notEmpty\"`" + `
	Skip string ` + "`env:\"-\"`" + `
	Map map[string]string ` + "`env:\"A_MAP\" envSeparator:\",\" envKeyValSeparator:\":\"`" + ` // Map pairs.
}

var defaultAddr = "127.0.0.1:9000"
`,
			},
			spec: Spec{Name: "a", Roots: []Root{{"services/a", "Config"}}, Defaults: map[string]string{"ADDR": "127.0.0.1:9000"}},
			want: []Setting{
				{Name: "ADDR", Default: "127.0.0.1:9000", Meaning: "the listen address.", Type: "string", Field: "Config.Config.Addr"},
				{Name: "WAIT", Default: "5s", Meaning: "how long to wait (default 5s).", Type: "time.Duration", Field: "Config.Config.Wait"},
				{Name: "A_TAGS", Default: "x,y", Meaning: "the tags, comma-separated.", Type: "[]string", Separator: ",", Field: "Config.Tags"},
				{Name: "A_KEY", Meaning: "the key.", Type: "string", Required: true, NotEmpty: true, Field: "Config.Key"},
				{Name: "A_MAP", Meaning: "pairs.", Type: "map[string]string", Separator: ",", KeyValSeparator: ":", Field: "Config.Map"},
			},
		},
		{
			name: "named nested structs with envPrefix, prefixes add up; nil pointer skipped",
			files: map[string]string{
				"services/b/internal/cfg/cfg.go": `package cfg

// Inner is nested.
type Inner struct {
	// Depth goes deep.
	Depth int ` + "`env:\"DEPTH\" envDefault:\"3\"`" + `
}

// Outer holds Inner.
type Outer struct {
	// Name names.
	Name string ` + "`env:\"NAME\"`" + `
	In Inner ` + "`envPrefix:\"IN_\"`" + `
	Ptr *Inner
	Init *Inner ` + "`env:\",init\" envPrefix:\"P_\"`" + `
}
`,
				"services/b/main.go": `package main

import c "example.com/fix/services/b/internal/cfg"

// Config is b's.
type Config struct {
	Out c.Outer ` + "`envPrefix:\"B_\"`" + `
}
`,
			},
			spec: Spec{Name: "b", Roots: []Root{{"services/b", "Config"}}},
			want: []Setting{
				{Name: "B_NAME", Meaning: "names.", Type: "string", Field: "Config.Out.Name"},
				{Name: "B_IN_DEPTH", Default: "3", Meaning: "goes deep.", Type: "int", Field: "Config.Out.In.Depth"},
				{Name: "B_P_DEPTH", Default: "3", Meaning: "goes deep.", Type: "int", Field: "Config.Out.Init.Depth"},
			},
		},
		{
			name: "missing doc comment is an error naming the field",
			files: map[string]string{"services/c/main.go": `package main

// Config is c's.
type Config struct {
	// Documented is.
	Documented string ` + "`env:\"C_DOC\"`" + `
	Bare string ` + "`env:\"C_BARE\"`" + `
}
`},
			spec:    Spec{Name: "c", Roots: []Root{{"services/c", "Config"}}},
			wantErr: "Config.Bare (env C_BARE) has no doc comment",
		},
		{
			name: "a name declared twice",
			files: map[string]string{"services/d/main.go": `package main

// Config is d's.
type Config struct {
	// One.
	One string ` + "`env:\"D\"`" + `
	// Two.
	Two string ` + "`env:\"D\"`" + `
}
`},
			spec:    Spec{Name: "d", Roots: []Root{{"services/d", "Config"}}},
			wantErr: "D declared twice",
		},
		{
			name: "code default not in the source",
			files: map[string]string{
				"pkg/shared/shared.go": sharedPkg,
				"services/e/main.go": `package main

import "example.com/fix/pkg/shared"

// Config is e's.
type Config struct{ shared.Config }
`},
			spec:    Spec{Name: "e", Roots: []Root{{"services/e", "Config"}}, Defaults: map[string]string{"ADDR": "127.0.0.1:1"}},
			wantErr: `code default ADDR="127.0.0.1:1" is not a string literal`,
		},
		{
			name:    "missing root type",
			files:   map[string]string{"services/f/main.go": "package main\n"},
			spec:    Spec{Name: "f", Roots: []Root{{"services/f", "Config"}}},
			wantErr: "no struct type Config in services/f",
		},
		{
			name: "test files are not read",
			files: map[string]string{"services/g/main_test.go": `package main

// Config is only in a test.
type Config struct{}
`},
			spec:    Spec{Name: "g", Roots: []Root{{"services/g", "Config"}}},
			wantErr: "no struct type Config in services/g",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := writeTree(t, tt.files)
			got, err := newWalker(root, fixModule).service(tt.spec)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(Setting{}, "Pos")); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
			for _, s := range got {
				if !strings.Contains(s.Pos, ".go:") {
					t.Errorf("%s: Pos %q is not file:line", s.Name, s.Pos)
				}
			}
		})
	}
}

func TestCheckUnreachable(t *testing.T) {
	files := map[string]string{
		"pkg/shared/shared.go": sharedPkg,
		"pkg/unused/unused.go": `package unused

// Orphan is reached by nobody.
type Orphan struct {
	// X.
	X string ` + "`env:\"X\"`" + `
}
`,
		"services/a/main.go": `package main

import "example.com/fix/pkg/shared"

// Config is a's.
type Config struct{ shared.Config }
`,
		"services/a/internal/extra/extra.go": `package extra

// Config is a new struct a's roots forgot.
type Config struct {
	// Y.
	Y string ` + "`env:\"A_Y\"`" + `
}
`,
		"services/a/internal/extra/testdata/x.go": `package x

// Ignored lives in testdata.
type Ignored struct {
	Z string ` + "`env:\"Z\"`" + `
}
`,
	}
	root := writeTree(t, files)
	specs := []Spec{{Name: "a", Roots: []Root{{"services/a", "Config"}}}}
	_, err := check(root, fixModule, specs)
	if err == nil {
		t.Fatal("check passed with two unreachable structs")
	}
	for _, want := range []string{
		`services/a/internal/extra.Config has env tags but no root of service "a" reaches it`,
		"pkg/unused.Orphan has env tags but no service's roots reach it",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\ndoes not contain %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "Ignored") || strings.Contains(err.Error(), "shared") {
		t.Errorf("error names a reachable or testdata struct: %v", err)
	}

	specs[0].Roots = append(specs[0].Roots, Root{"services/a/internal/extra", "Config"}, Root{"pkg/unused", "Orphan"})
	if _, err := check(root, fixModule, specs); err != nil {
		t.Errorf("check with every struct reached: %v", err)
	}
}

func TestCondense(t *testing.T) {
	tests := []struct{ doc, field, name, want string }{
		{"Addr is the listen address, host:port (env ADDR).\n", "Addr", "ADDR", "the listen address, host:port."},
		{"Ports are the ports (WEBFETCH_PORTS), for\nevery destination.", "Ports", "WEBFETCH_PORTS", "the ports, for every destination."},
		{"NoAuth turns auth off (env INSECURE_NO_AUTH=true).", "NoAuth", "INSECURE_NO_AUTH", "turns auth off (set to true)."},
		{"Rate is the rate (env RATE; the free plan's 1).", "Rate", "RATE", "the rate (the free plan's 1)."},
		{"Max caps it (env\nMAX, default 2 MiB).", "Max", "MAX", "caps it (default 2 MiB)."},
		{"WebhookURL, when set, receives a POST.", "WebhookURL", "W", "when set, receives a POST."},
		{"Holds (env OTHER) as is.", "Field", "NAME", "Holds (env OTHER) as is."},
	}
	for _, tt := range tests {
		if got := Condense(tt.doc, tt.field, tt.name); got != tt.want {
			t.Errorf("Condense(%q) = %q, want %q", tt.doc, got, tt.want)
		}
	}
}

func TestTable(t *testing.T) {
	got := Table([]Setting{
		{Name: "A", Default: "x|y<z>", Meaning: "pipes | here, <tag>"},
		{Name: "B", Meaning: "list", Separator: ",", Required: true},
	})
	want := "| variable | default | meaning |\n| --- | --- | --- |\n" +
		"| `A` | `x\\|y<z>` | pipes \\| here, &lt;tag> |\n" +
		"| `B` | (none) | list (required; list separated by `,`) |\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Table (-want +got):\n%s", diff)
	}
}

func TestSplice(t *testing.T) {
	b, e := Markers("brain")
	tests := []struct {
		name, readme, want, wantErr string
	}{
		{"replaces between markers, keeps the rest", "x\n" + b + "\nold\n" + e + "\ny\n", "x\n" + b + "\nNEW\n" + e + "\ny\n", ""},
		{"missing end", "x\n" + b + "\n", "", "no"},
		{"twice", b + e + b + e, "", "more than once"},
		{"reversed", e + "\n" + b, "", "before"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Splice([]byte(tt.readme), map[string]string{"brain": "NEW\n"})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRepository runs the real table over this repository: every
// service's settings are listed with a meaning, and no env struct is
// forgotten.
func TestRepository(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(root); err != nil {
		t.Fatal(err)
	}
	for _, name := range Names() {
		s, err := Service(root, name)
		if err != nil {
			t.Fatal(err)
		}
		if len(s) == 0 {
			t.Errorf("%s: no settings", name)
		}
	}
}
