module github.com/brain-tools/suite/services/local

go 1.26.0

require github.com/brain-tools/suite/pkg v0.0.0

replace github.com/brain-tools/suite/pkg => ../../pkg
