package keys

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name, key string
		problem   string // substring of the error; "" = valid
	}{
		{"plain", "a.txt", ""},
		{"nested", "dir/sub/a.txt", ""},
		{"specials", "my file (1)+x=y:z.txt", ""},
		{"non-ascii", "données/日本語/émoji-😀.txt", ""},
		{"dots inside names", "a..b/.hidden/..x/x..", ""},
		{"encoded separator is literal", "..%2F..%2Fother/x", ""},
		{"backslash is literal", `..\..\x`, ""},
		{"max length", strings.Repeat("a", MaxKeyBytes), ""},
		{"too long", strings.Repeat("a", MaxKeyBytes+1), "longer than the 1024-byte limit"},
		{"multibyte over limit", strings.Repeat("é", MaxKeyBytes/2) + "a", "longer than the 1024-byte limit"},
		{"empty", "", "empty"},
		{"leading slash", "/etc/passwd", "starts with /"},
		{"dotdot", "..", `".." segment`},
		{"dotdot first", "../b/x", `".." segment`},
		{"dotdot middle", "a/../../b/x", `".." segment`},
		{"dotdot last", "a/..", `".." segment`},
		{"dot", "a/./b", `"." segment`},
		{"double slash", "a//b", "empty segment"},
		{"trailing slash", "a/", "ends with /"},
		{"invalid utf8", "a\xffb", "not valid UTF-8"},
		{"nul", "a\x00b", "control character U+0000"},
		{"newline", "a\nb", "control character U+000A"},
		{"del", "a\x7fb", "control character U+007F"},
		{"c1", "a\u0085b", "control character U+0085"},
		// versitygw stages uploads under .sgwtmp and its listings skip a
		// directory of that name at any depth.
		{"reserved segment first", ".sgwtmp/x", "reserved by the S3 server"},
		{"reserved segment inside", "a/.sgwtmp/x", "reserved by the S3 server"},
		{"reserved segment last", "a/.sgwtmp", "reserved by the S3 server"},
		{"staging name beside an object", "a/.x.sgwtmp.123", "reserved by the S3 server"},
		{"similar names are fine", "sgwtmp/.sgwtmpx/x.sgwtmp", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.key)
			switch {
			case tt.problem == "" && err != nil:
				t.Fatalf("Validate(%q) = %v, want nil", tt.key, err)
			case tt.problem != "" && err == nil:
				t.Fatalf("Validate(%q) = nil, want error containing %q", tt.key, tt.problem)
			case tt.problem != "" && !strings.Contains(err.Error(), tt.problem):
				t.Fatalf("Validate(%q) = %q, want it to contain %q", tt.key, err, tt.problem)
			}
		})
	}
}

func TestValidatePrefix(t *testing.T) {
	for _, ok := range []string{"", "a", "a/", "dir/sub/", "dir/pa"} {
		if err := ValidatePrefix(ok); err != nil {
			t.Errorf("ValidatePrefix(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"/", "/a", "..", "../", "a/..", "a/../", "a//", "./", "a\x00"} {
		if err := ValidatePrefix(bad); err == nil {
			t.Errorf("ValidatePrefix(%q) = nil, want error", bad)
		}
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name, root      string
		mode            Mode
		tenant, session string
		prefix, problem string
	}{
		{"tenant", "", ModeTenant, "acme", "s1", "acme/", ""},
		{"session", "", ModeSession, "acme", "s1", "acme/s1/", ""},
		{"root", "tools/", ModeTenant, "acme", "", "tools/acme/", ""},
		{"slash in tenant is escaped", "", ModeTenant, "a/b", "", "a%2Fb/", ""},
		{"percent is escaped", "", ModeTenant, "a%2Fb", "", "a%252Fb/", ""},
		{"slash in session is escaped", "", ModeSession, "a", "../b", "a/..%2Fb/", ""},
		{"control escaped", "", ModeTenant, "a\nb", "", "a%0Ab/", ""},
		{"empty tenant", "", ModeTenant, "", "s", "", "tenant_id: empty"},
		{"dotdot tenant", "", ModeTenant, "..", "s", "", "tenant_id:"},
		{"dot tenant", "", ModeTenant, ".", "s", "", "tenant_id:"},
		{"empty session", "", ModeSession, "t", "", "", "session_id: empty"},
		{"root without slash", "tools", ModeTenant, "t", "", "", "must end with /"},
		{"root with dotdot", "../", ModeTenant, "t", "", "", `".." segment`},
		{"bad mode", "", Mode("bucket"), "t", "", "", "key prefix mode"},
		{"huge tenant", "", ModeTenant, strings.Repeat("x", MaxKeyBytes), "", "", "no room"},
		{"reserved tenant", "", ModeTenant, ".sgwtmp", "", "", `tenant_id: ".sgwtmp" is not usable as a storage namespace: the segment ".sgwtmp" is reserved by the S3 server`},
		{"reserved session", "", ModeSession, "acme", ".sgwtmp", "", "session_id:"},
		{"reserved root", ".sgwtmp/", ModeTenant, "acme", "", "", "root prefix"},
		{"reserved name under a root is still refused", "r/", ModeTenant, ".sgwtmp", "", "", "reserved by the S3 server"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns, err := New(tt.root, tt.mode, tt.tenant, tt.session)
			if tt.problem != "" {
				if err == nil || !strings.Contains(err.Error(), tt.problem) {
					t.Fatalf("New() error = %v, want %q", err, tt.problem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ns.Prefix() != tt.prefix {
				t.Fatalf("prefix = %q, want %q", ns.Prefix(), tt.prefix)
			}
		})
	}
}

// Distinct tenants and sessions must never share a prefix, nor may one
// prefix contain another: that is what keeps listings apart.
func TestNamespacesDisjoint(t *testing.T) {
	ids := []string{"a", "ab", "a/b", "a%2Fb", "a b", "A", "b", "a/", "/a", "a%"}
	seen := map[string]string{}
	var prefixes []string
	for _, tenant := range ids {
		for _, session := range ids {
			ns, err := New("", ModeSession, tenant, session)
			if err != nil {
				t.Fatal(err)
			}
			id := tenant + " | " + session
			if other, dup := seen[ns.Prefix()]; dup {
				t.Fatalf("%q and %q share prefix %q", id, other, ns.Prefix())
			}
			seen[ns.Prefix()] = id
			prefixes = append(prefixes, ns.Prefix())
		}
	}
	for _, p := range prefixes {
		for _, q := range prefixes {
			if p != q && strings.HasPrefix(q, p) {
				t.Fatalf("prefix %q contains %q", p, q)
			}
		}
	}
}

func TestObjectAndRelative(t *testing.T) {
	ns, err := New("r/", ModeSession, "acme", "sess")
	if err != nil {
		t.Fatal(err)
	}
	full, err := ns.Object("dir/a b.txt")
	if err != nil {
		t.Fatal(err)
	}
	if full != "r/acme/sess/dir/a b.txt" {
		t.Fatalf("full = %q", full)
	}
	if k, ok := ns.Relative(full); !ok || k != "dir/a b.txt" {
		t.Fatalf("Relative = %q, %v", k, ok)
	}
	if _, ok := ns.Relative("r/other/sess/x"); ok {
		t.Fatal("Relative accepted a key outside the namespace")
	}

	// The full key must fit S3's limit: the prefix takes room from the key.
	max := ns.MaxKeyBytes()
	if max != MaxKeyBytes-len("r/acme/sess/") {
		t.Fatalf("MaxKeyBytes = %d", max)
	}
	if _, err := ns.Object(strings.Repeat("k", max)); err != nil {
		t.Fatalf("key at the limit: %v", err)
	}
	if _, err := ns.Object(strings.Repeat("k", max+1)); err == nil || !strings.Contains(err.Error(), "limited to") {
		t.Fatalf("key over the limit: %v", err)
	}
	if _, err := ns.ListPrefix(strings.Repeat("k", max+1)); err == nil {
		t.Fatal("prefix over the limit accepted")
	}
	if p, err := ns.ListPrefix(""); err != nil || p != ns.Prefix() {
		t.Fatalf("ListPrefix(\"\") = %q, %v", p, err)
	}
	var zero Namespace
	if _, err := zero.Object("a"); err == nil {
		t.Fatal("zero namespace accepted a key")
	}
}

func TestRedact(t *testing.T) {
	ns, _ := New("", ModeTenant, "a b", "")
	msg := "no such key: a%20b/x.txt (a%2520b/x.txt)"
	if got := ns.Redact(msg); strings.Contains(got, "a%20b/") {
		t.Fatalf("Redact left the prefix: %q", got)
	}
}

func TestParseMode(t *testing.T) {
	for _, s := range []string{"tenant", "session"} {
		if _, err := ParseMode(s); err != nil {
			t.Error(err)
		}
	}
	if _, err := ParseMode("Tenant"); err == nil {
		t.Error("ParseMode(Tenant) = nil")
	}
}
