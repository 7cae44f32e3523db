// Command sandbox is the sandbox tool service: it runs commands for the
// agent in a per-session workspace, on this host with bubblewrap or on
// E2B, Daytona or Modal. README.md lists its configuration.
package main

import (
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/services/sandbox/internal/app"
)

func main() { service.Main(app.Run, service.DefaultAddr(app.DefaultAddr)) }
