// Command webfetch serves the web_fetch tool: fetch a public URL through an
// SSRF guard and return Markdown, text or HTML. Configuration is read from
// the environment; see README.md.
package main

import (
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/services/webfetch/internal/webfetch"
)

func main() { service.Main(webfetch.Run, service.DefaultAddr(webfetch.DefaultAddr)) }
