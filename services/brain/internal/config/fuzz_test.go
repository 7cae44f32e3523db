package config

import (
	"encoding/json"
	"testing"

	"github.com/brain-tools/suite/pkg/tool"
)

// FuzzParse feeds arbitrary documents to Parse: it must never panic or
// hang, and whatever it accepts must satisfy the contract's binding rules.
// The seed corpus is under testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"tools":[{"name":"echo","description":"d","input_schema":{"type":"object"},"url":"http://127.0.0.1:8081/tools/echo","tenants":["local"]}],"api_keys":[{"env":"BRAIN_API_KEY","tenant":"local"}]}`))
	f.Add([]byte(`{"tools":[{"name":"e","description":"d","input_schema":{"$ref":"#/$defs/a","$defs":{"a":{"type":"string","format":"email"}}},"output_schema":{"type":"array"},"url":"https://h/x?q=1","tenants":["t"],"token_env":"BRAIN_TOOLS_KEY","timeout_seconds":1,"max_output_bytes":2097152,"inspect_session":true,"mcp_tool":"m"}]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"tools":[],"api_keys":[{"env":"BRAIN_API_KEY","tenant":"local","tenant":"x"}]}`))
	env := map[string]string{"BRAIN_API_KEY": "k1", "OTHER_API_KEY": "k2", "BRAIN_TOOLS_KEY": "t"}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, func(k string) string { return env[k] })
		if err != nil {
			if c != nil {
				t.Fatalf("Parse returned a config with error %v", err)
			}
			return
		}
		if len(c.APIKeys) == 0 {
			t.Fatal("accepted a config without api_keys")
		}
		if dups, _ := duplicateKeys(data); len(dups) > 0 {
			t.Fatalf("accepted duplicate keys %v", dups)
		}
		keyTenants := map[string]bool{}
		for _, k := range c.APIKeys {
			keyTenants[k.Tenant] = true
		}
		seen := map[string]bool{}
		for _, tl := range c.Tools {
			tenants := map[string]bool{}
			for _, tn := range tl.Tenants {
				if tenants[tn] || !keyTenants[tn] {
					t.Fatalf("accepted tenant %q twice or without an API key in %v", tn, tl.Tenants)
				}
				tenants[tn] = true
			}
			if !tool.ValidName(tl.Name) || seen[tl.Name] {
				t.Fatalf("accepted bad or duplicate name %q", tl.Name)
			}
			seen[tl.Name] = true
			if tl.Description == "" || len(tl.Tenants) == 0 || tl.input == nil {
				t.Fatalf("accepted incomplete binding %+v", tl.Binding)
			}
			if err := tool.ValidateURL(tl.URL); err != nil {
				t.Fatalf("accepted bad url %q: %v", tl.URL, err)
			}
			if s := tl.Timeout().Seconds(); s < 1 || s > tool.MaxTimeoutSeconds {
				t.Fatalf("accepted timeout %v", tl.Timeout())
			}
			if n := tl.MaxOutputBytes(); n < 1 || n > tool.MaxOutputBytesLimit {
				t.Fatalf("accepted max_output_bytes %d", n)
			}
			if tl.TokenEnv != "" && tl.Token == "" {
				t.Fatalf("accepted token_env %q with no token", tl.TokenEnv)
			}
			// Validation of any document must not panic either.
			_ = tl.ValidateArguments(json.RawMessage(`{"text":"x"}`))
			_ = tl.ValidateOutput(data)
		}
		for _, k := range c.APIKeys {
			if k.Env == "" || k.Tenant == "" {
				t.Fatalf("accepted incomplete api key %+v", k)
			}
			if tenant, ok := c.TenantForKey(env[k.Env]); !ok || tenant == "" {
				t.Fatalf("key of %s does not map to a tenant", k.Env)
			}
		}
	})
}
