package deploy

// The environment tables of README.md, from the services' Config structs,
// and its metrics table, from pkg/metrics.
//go:generate go run ./cmd/envdoc -readme README.md
