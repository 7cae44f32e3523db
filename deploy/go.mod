module github.com/brain-tools/suite/deploy

go 1.26.0
