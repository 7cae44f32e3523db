// Package mcpconformance holds the outside checks of the local service's
// MCP endpoint: the MCP conformance suite and the MCP Inspector CLI, run
// against the local service's tools served at /mcp by pkg/service. The package
// has tests only; the Node tools come from scripts/mcp-deps.sh.
package mcpconformance
