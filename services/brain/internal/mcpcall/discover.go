package mcpcall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/brain/internal/config"
)

// DefaultMaxPages caps the tools/list pages Discover reads.
const DefaultMaxPages = 100

// DefaultDiscoverTimeout bounds a whole discovery.
const DefaultDiscoverTimeout = time.Minute

// Discovery is what an MCP server lists.
type Discovery struct {
	// Server is the URL asked.
	Server string
	// ProtocolVersion is the MCP revision the server and brain agreed on.
	ProtocolVersion string
	// Tools are the server's tools in the order first listed, each once
	// (by name) however often a server lists it.
	Tools []*mcp.Tool
	// Pages is how many tools/list pages were read.
	Pages int
	// Stop says why listing stopped: "last page" (no next cursor), "repeated
	// cursor" or "page cap".
	Stop string
}

// Discover lists the tools of the MCP server at url, sending token as a
// bearer token when not empty. It follows nextCursor from page to page and
// stops at a page without one, at a cursor it has already followed (a
// server that loops), or after maxPages pages (DefaultMaxPages when 0). A
// tool listed again under the same name is kept once.
func (c *Caller) Discover(ctx context.Context, url, token string, maxPages int) (*Discovery, error) {
	return c.DiscoverEndpoint(ctx, Endpoint{URL: url, Token: token}, maxPages)
}

// DiscoverEndpoint is Discover for an endpoint with headers (a session's
// MCP server).
func (c *Caller) DiscoverEndpoint(ctx context.Context, e Endpoint, maxPages int) (*Discovery, error) {
	url := e.URL
	if err := tool.ValidateURL(url); err != nil {
		return nil, fmt.Errorf("discover: url: %w", err)
	}
	if maxPages <= 0 {
		maxPages = DefaultMaxPages
	}
	conn, err := c.pool.get(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("discover %s: connect: %s", url, mcpReason(err))
	}
	d := &Discovery{Server: url, ProtocolVersion: conn.session.InitializeResult().ProtocolVersion}
	seen, listed := map[string]bool{}, map[string]bool{}
	cursor := ""
	for {
		if d.Pages == maxPages {
			d.Stop = "page cap"
			return d, nil
		}
		res, err := conn.session.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, fmt.Errorf("discover %s: tools/list page %d: %s", url, d.Pages+1, mcpReason(err))
		}
		d.Pages++
		// A tool's name is unique on its server (MCP 2025-11-25, "Tool
		// names"): one listed again (a page repeated under a cursor that
		// does not advance) is the same tool, and one binding serves it.
		for _, t := range res.Tools {
			if t != nil && !listed[t.Name] {
				listed[t.Name] = true
				d.Tools = append(d.Tools, t)
			}
		}
		switch next := res.NextCursor; {
		case next == "":
			d.Stop = "last page"
			return d, nil
		case seen[next] || next == cursor:
			d.Stop = "repeated cursor"
			return d, nil
		default:
			seen[next] = true
			cursor = next
		}
	}
}

var nonName = regexp.MustCompile(`[^A-Za-z0-9_]+`)

// bindingName turns an MCP tool name into a binding name (a letter, then
// up to 63 letters, digits or underscores), unique among taken.
func bindingName(mcpName string, taken map[string]bool) string {
	n := strings.Trim(nonName.ReplaceAllString(mcpName, "_"), "_")
	if n == "" || !(n[0] >= 'A' && n[0] <= 'Z' || n[0] >= 'a' && n[0] <= 'z') {
		n = "mcp_" + n
	}
	if len(n) > 64 {
		n = n[:64]
	}
	base := n
	for i := 2; taken[n]; i++ {
		suffix := fmt.Sprintf("_%d", i)
		if len(base)+len(suffix) > 64 {
			base = base[:64-len(suffix)]
		}
		n = base + suffix
	}
	taken[n] = true
	return n
}

// Bindings turns a discovery into host-config bindings ready to paste into
// brain.json: name (the MCP name made a valid binding name), description
// (the server's, or one naming the tool), the server's input and output
// schemas, url, mcp_tool, token_env and tenants.
func Bindings(d *Discovery, tokenEnv string, tenants []string) ([]tool.Binding, error) {
	taken := map[string]bool{}
	out := make([]tool.Binding, 0, len(d.Tools))
	for _, t := range d.Tools {
		b := tool.Binding{
			Name:        bindingName(t.Name, taken),
			Description: strings.TrimSpace(t.Description),
			URL:         d.Server,
			Tenants:     tenants,
			TokenEnv:    tokenEnv,
			MCPTool:     t.Name,
		}
		if b.Description == "" {
			b.Description = strings.TrimSpace(t.Title)
		}
		if b.Description == "" {
			b.Description = fmt.Sprintf("MCP tool %s of %s.", t.Name, d.Server)
		}
		in, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("tool %q: inputSchema: %w", t.Name, err)
		}
		b.InputSchema = in
		if t.OutputSchema != nil {
			outSchema, err := json.Marshal(t.OutputSchema)
			if err != nil {
				return nil, fmt.Errorf("tool %q: outputSchema: %w", t.Name, err)
			}
			b.OutputSchema = outSchema
		}
		out = append(out, b)
	}
	return out, nil
}

// RunDiscover is the command `brain mcp discover URL [--token-env NAME]
// [--tenant NAME]...`: it lists the MCP server's tools and prints
// {"tools":[<binding>...]} to stdout, ready for the tools array of
// brain.json, and a summary plus a warning per binding that would not pass
// `brain -check` to stderr. The token is read from the environment
// variable --token-env names (getenv); tenants default to ["local"].
func RunDiscover(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	const usage = "usage: brain mcp discover URL [--token-env NAME] [--tenant NAME]..."
	var url, tokenEnv string
	var tenants []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") {
			if url != "" {
				return fmt.Errorf("unexpected argument %q; %s", a, usage)
			}
			url = a
			continue
		}
		if name == "h" || name == "help" {
			fmt.Fprintln(stderr, usage)
			return nil
		}
		if name != "token-env" && name != "tenant" {
			return fmt.Errorf("unknown flag %q; %s", a, usage)
		}
		if !hasValue {
			if i+1 >= len(args) {
				return fmt.Errorf("flag --%s needs a value; %s", name, usage)
			}
			i++
			value = args[i]
		}
		if value == "" {
			return fmt.Errorf("flag --%s: must not be empty", name)
		}
		if name == "token-env" {
			tokenEnv = value
		} else {
			tenants = append(tenants, value)
		}
	}
	if url == "" {
		//lint:ignore ST1005 the usage text is printed as it is, lines and all
		return errors.New(usage)
	}
	if len(tenants) == 0 {
		tenants = []string{"local"}
	}
	var token string
	if tokenEnv != "" {
		if token = getenv(tokenEnv); token == "" {
			return fmt.Errorf("--token-env: %s is not set", tokenEnv)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultDiscoverTimeout)
	defer cancel()
	c := New(Options{})
	defer c.Close()
	d, err := c.Discover(ctx, url, token, 0)
	if err != nil {
		return err
	}
	bindings, err := Bindings(d, tokenEnv, tenants)
	if err != nil {
		return fmt.Errorf("discover %s: %w", url, err)
	}
	fmt.Fprintf(stderr, "%s: %d tools on %d pages (%s), MCP %s\n", url, len(bindings), d.Pages, d.Stop, d.ProtocolVersion)
	// Check each binding as brain -check would, with any token_env set and
	// an API key for each tenant (each variable gets a distinct value).
	fakeEnv := func(k string) string { return "set:" + k }
	keys := make([]map[string]string, len(tenants))
	for i, tenant := range tenants {
		keys[i] = map[string]string{"env": fmt.Sprintf("DISCOVER_API_KEY_%d", i), "tenant": tenant}
	}
	for _, b := range bindings {
		doc, _ := json.Marshal(map[string]any{"tools": []tool.Binding{b}, "api_keys": keys})
		if _, err := config.Parse(doc, fakeEnv); err != nil {
			fmt.Fprintf(stderr, "warning: binding %q (MCP tool %q) would not pass brain -check: %s\n", b.Name, b.MCPTool, strings.ReplaceAll(err.Error(), "\n", "; "))
		}
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(map[string]any{"tools": bindings})
}
