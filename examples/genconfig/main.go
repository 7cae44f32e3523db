// Command genconfig writes a brain host config from the bindings that
// running tool services publish at GET /tools, so the config is generated
// rather than typed:
//
//	BRAIN_TOOLS_KEY=... genconfig -tenant local -api-key-env BRAIN_API_KEY \
//	    http://127.0.0.1:8081 http://127.0.0.1:8082 > brain.json
//
// The bearer token for GET /tools comes from BRAIN_TOOLS_KEY.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/pkg/tool"
)

type apiKey struct {
	Env    string `json:"env"`
	Tenant string `json:"tenant"`
}

type hostConfig struct {
	APIKeys []apiKey       `json:"api_keys"`
	Tools   []tool.Binding `json:"tools"`
}

func main() {
	tenant := flag.String("tenant", "local", "tenant the API key maps to")
	keyEnv := flag.String("api-key-env", "BRAIN_API_KEY", "environment variable holding the tenant's API key")
	flag.Parse()
	if err := run(os.Stdout, *tenant, *keyEnv, flag.Args(), os.Getenv("BRAIN_TOOLS_KEY")); err != nil {
		fmt.Fprintln(os.Stderr, "genconfig:", err)
		os.Exit(1)
	}
}

func run(out io.Writer, tenant, keyEnv string, services []string, token string) error {
	if len(services) == 0 {
		return fmt.Errorf("name at least one service base URL")
	}
	cfg := hostConfig{APIKeys: []apiKey{{Env: keyEnv, Tenant: tenant}}}
	hc := &http.Client{Timeout: 10 * time.Second}
	seen := map[string]string{}
	for _, base := range services {
		req, err := http.NewRequest(http.MethodGet, strings.TrimRight(base, "/")+"/tools", nil)
		if err != nil {
			return err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("GET %s/tools: %w", base, err)
		}
		var got struct {
			Tools []tool.Binding `json:"tools"`
		}
		err = strictjson.Decode(resp.Body, 8<<20, &got)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s/tools: %s", base, resp.Status)
		}
		if err != nil {
			return fmt.Errorf("GET %s/tools: %w", base, err)
		}
		if len(got.Tools) == 0 {
			return fmt.Errorf("GET %s/tools: publishes no tools", base)
		}
		for _, b := range got.Tools {
			if other, dup := seen[b.Name]; dup {
				return fmt.Errorf("tool %q is published by both %s and %s", b.Name, other, base)
			}
			seen[b.Name] = base
			if err := b.Validate(); err != nil {
				return fmt.Errorf("%s publishes an invalid binding %q: %w", base, b.Name, err)
			}
			cfg.Tools = append(cfg.Tools, b)
		}
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(cfg)
}
