module github.com/brain-tools/suite/services/webfetch

go 1.26.0

require (
	code.dny.dev/ssrf v0.3.0
	golang.org/x/net v0.62.0
)

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/hashicorp/golang-lru/v2 v2.0.7 // indirect
	github.com/temoto/robotstxt v1.1.2 // indirect
	golang.org/x/text v0.43.0 // indirect
)

replace github.com/brain-tools/suite/pkg => ../../pkg
