// Command browser serves a real browser to the agent: browser_open,
// browser_act, browser_screenshot and browser_pages on Debian's Chromium,
// one isolated browser context per tenant + session, every byte Chromium
// fetches sent through the SSRF guard. Configuration is read from the
// environment; see README.md.
package main

import (
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/services/browser/internal/app"
)

func main() { service.Main(app.Run, service.DefaultAddr(app.DefaultAddr)) }
