package deploy

// The environment tables of README.md, from the services' Config structs.
//go:generate go run ./cmd/envdoc -readme README.md
