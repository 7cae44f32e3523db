// Command envdoc rewrites the environment tables of deploy/README.md from
// the services' Config structs (see package envdoc), and its metrics table
// from pkg/metrics' catalogue, or with -check only reports whether the
// file is up to date.
//
//	go run ./deploy/cmd/envdoc [-root .] [-readme deploy/README.md] [-check]
//	go run ./deploy/cmd/envdoc -list SERVICE   print one service's settings, tab-separated
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/brain-tools/suite/deploy/envdoc"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "envdoc:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("envdoc", flag.ContinueOnError)
	root := fs.String("root", "", "repository root (default: found upwards from the working directory by go.work)")
	readme := fs.String("readme", "", "README to rewrite (default ROOT/deploy/README.md)")
	check := fs.Bool("check", false, "only report whether the README is up to date; exit 1 if not")
	list := fs.String("list", "", "print the settings of this service and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *root == "" {
		r, err := findRoot()
		if err != nil {
			return err
		}
		*root = r
	}
	if *list != "" {
		settings, err := envdoc.Service(*root, *list)
		if err != nil {
			return err
		}
		for _, s := range settings {
			fmt.Printf("%s\t%s\t%s\n", s.Name, s.Default, s.Meaning)
		}
		return nil
	}
	if *readme == "" {
		*readme = filepath.Join(*root, "deploy", "README.md")
	}
	old, err := os.ReadFile(*readme)
	if err != nil {
		return err
	}
	updated, err := envdoc.Render(*root, old)
	if err != nil {
		return err
	}
	if bytes.Equal(old, updated) {
		return nil
	}
	if *check {
		return fmt.Errorf("%s is out of date: run go run ./deploy/cmd/envdoc", *readme)
	}
	return os.WriteFile(*readme, updated, 0o644)
}

// findRoot walks up from the working directory to the directory holding
// go.work.
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.work above the working directory: pass -root")
		}
		dir = parent
	}
}
