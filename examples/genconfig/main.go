// Command genconfig writes a brain host config from the bindings that
// running tool services publish at GET /tools, so the config is generated
// rather than typed:
//
//	BRAIN_TOOLS_KEY=... genconfig -tenant local -api-key-env BRAIN_API_KEY \
//	    [-host examples/brain.host.json] http://127.0.0.1:8081 http://127.0.0.1:8082 > brain.json
//
// The bearer token for GET /tools comes from BRAIN_TOOLS_KEY. -host names
// what the host itself adds, which no service publishes: its own bindings
// (function tools, answered by the application), host settings of
// published bindings (require_approval, max_concurrency) and the approvals
// object:
//
//	{"tools": [<binding>...], "bindings": {"storage_delete": {"require_approval": "always"}},
//	 "approvals": {"tool": "request_approval", "cancel_tool": "approval_cancel", "timeout_seconds": 600}}
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
	"github.com/brain-tools/suite/pkg/version"
)

type apiKey struct {
	Env    string `json:"env"`
	Tenant string `json:"tenant"`
}

type hostConfig struct {
	APIKeys   []apiKey       `json:"api_keys"`
	Tools     []tool.Binding `json:"tools"`
	Approvals *approvals     `json:"approvals,omitempty"`
}

// hostFile is the -host file: what brain's host config adds to the
// bindings the services publish.
type hostFile struct {
	Tools     []tool.Binding          `json:"tools"`
	Bindings  map[string]hostSettings `json:"bindings"`
	Approvals *approvals              `json:"approvals"`
}

// hostSettings are the binding fields that belong to the host, not to the
// service that publishes the binding.
type hostSettings struct {
	RequireApproval string `json:"require_approval,omitempty"`
	MaxConcurrency  int    `json:"max_concurrency,omitempty"`
}

type approvals struct {
	Tool           string `json:"tool,omitempty"`
	CancelTool     string `json:"cancel_tool,omitempty"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty"`
}

func main() {
	tenant := flag.String("tenant", "local", "tenant the API key maps to")
	keyEnv := flag.String("api-key-env", "BRAIN_API_KEY", "environment variable holding the tenant's API key")
	host := flag.String("host", "", "JSON file of what the host adds: its own bindings, host settings of published ones, approvals")
	showVersion := flag.Bool("version", false, version.FlagUsage)
	flag.Parse()
	if *showVersion {
		_ = version.Print(os.Stdout, "genconfig")
		return
	}
	var h *hostFile
	if *host != "" {
		var err error
		if h, err = readHost(*host); err != nil {
			fmt.Fprintln(os.Stderr, "genconfig:", err)
			os.Exit(1)
		}
	}
	if err := run(os.Stdout, *tenant, *keyEnv, flag.Args(), os.Getenv("BRAIN_TOOLS_KEY"), h); err != nil {
		fmt.Fprintln(os.Stderr, "genconfig:", err)
		os.Exit(1)
	}
}

// readHost reads and decodes the -host file strictly.
func readHost(path string) (*hostFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("-host: %w", err)
	}
	defer f.Close()
	var h hostFile
	if err := strictjson.Decode(f, 1<<20, &h); err != nil {
		return nil, fmt.Errorf("-host %s: %w", path, err)
	}
	return &h, nil
}

// apply adds h to cfg: its settings to the published bindings it names
// (each must be published), then its own bindings (each valid, and named
// as no published one), then its approvals.
func (h *hostFile) apply(cfg *hostConfig) error {
	index := map[string]int{}
	for i, b := range cfg.Tools {
		index[b.Name] = i
	}
	for name, set := range h.Bindings {
		i, ok := index[name]
		if !ok {
			return fmt.Errorf("-host: bindings.%s: no service publishes a tool %q", name, name)
		}
		b := &cfg.Tools[i]
		b.RequireApproval, b.MaxConcurrency = set.RequireApproval, set.MaxConcurrency
		if err := b.Validate(); err != nil {
			return fmt.Errorf("-host: bindings.%s: %w", name, err)
		}
	}
	for i, b := range h.Tools {
		if _, dup := index[b.Name]; dup {
			return fmt.Errorf("-host: tools[%d]: %q is also published by a service", i, b.Name)
		}
		if err := b.Validate(); err != nil {
			return fmt.Errorf("-host: tools[%d] %q: %w", i, b.Name, err)
		}
		index[b.Name] = len(cfg.Tools)
		cfg.Tools = append(cfg.Tools, b)
	}
	cfg.Approvals = h.Approvals
	return nil
}

func run(out io.Writer, tenant, keyEnv string, services []string, token string, host *hostFile) error {
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
	if host != nil {
		if err := host.apply(&cfg); err != nil {
			return err
		}
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(cfg)
}
