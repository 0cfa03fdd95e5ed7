// compose-check loads Compose files with compose-go, the loader Docker Compose
// itself uses (schema validation, interpolation, and the model's own checks),
// and prints the services it found. No Docker engine is needed.
//
//	compose-check -f deploy/compose.yaml
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"

	"github.com/compose-spec/compose-go/v2/cli"
)

func main() {
	var files multi
	flag.Var(&files, "f", "a Compose file (repeat for several)")
	flag.Parse()
	if len(files) == 0 {
		fmt.Fprintln(os.Stderr, "usage: compose-check -f compose.yaml [-f more.yaml]")
		os.Exit(2)
	}
	options, err := cli.NewProjectOptions(files, cli.WithOsEnv, cli.WithName("compose-check"), cli.WithProfiles([]string{"*"}))
	if err != nil {
		fail(err)
	}
	project, err := options.LoadProject(context.Background())
	if err != nil {
		fail(err)
	}
	names := make([]string, 0, len(project.Services))
	for name := range project.Services {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Println(name)
	}
}

type multi []string

func (m *multi) String() string     { return fmt.Sprint(*m) }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "compose-check:", err)
	os.Exit(1)
}
