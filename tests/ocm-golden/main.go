// Command ocm-golden writes Flotilla's golden fixtures by running OCM's own
// code on generated inputs. It is built inside an OCM checkout (see README.md);
// none of OCM's code is copied here, only called.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// now is the fixed instant every generated case is evaluated at.
var now = time.Date(2026, time.January, 15, 12, 0, 0, 0, time.UTC)

type fixtureFile struct {
	Generator string      `json:"generator"`
	OcmCommit string      `json:"ocmCommit"`
	Seed      int64       `json:"seed"`
	Cases     interface{} `json:"cases"`
}

func writeFixture(dir, name, commit string, seed int64, cases interface{}) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(fixtureFile{
		Generator: "tests/ocm-golden (see its README)",
		OcmCommit: commit,
		Seed:      seed,
		Cases:     cases,
	}); err != nil {
		return err
	}
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func main() {
	out := flag.String("out", "golden-out", "directory the JSON fixtures are written to")
	seed := flag.Int64("seed", 20261123, "seed of math/rand for the generated inputs")
	commit := flag.String("ocm-commit", "", "OCM commit the checkout is at (recorded in the fixtures)")
	only := flag.String("only", "rollout,placement,spechash", "comma-separated fixtures to write")
	flag.Parse()
	if *commit == "" {
		fmt.Fprintln(os.Stderr, "-ocm-commit is required")
		os.Exit(2)
	}
	for _, what := range strings.Split(*only, ",") {
		// Each fixture has its own generator seeded from the same seed so that
		// regenerating one does not change the others.
		rng := rand.New(rand.NewSource(*seed))
		var cases interface{}
		var n int
		var err error
		var file string
		switch what {
		case "rollout":
			c := rolloutCases(rng)
			cases, n, file = c, len(c), "rollout.json"
		case "placement":
			var c []placementCase
			c, err = placementCases(rng)
			cases, n, file = c, len(c), "placement.json"
		case "spechash":
			var c []specHashCase
			c, err = specHashCases(rng)
			cases, n, file = c, len(c), "spec-hash.json"
		default:
			err = fmt.Errorf("unknown fixture %q", what)
		}
		if err == nil {
			err = writeFixture(*out, file, *commit, *seed, cases)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
			os.Exit(1)
		}
		fmt.Printf("%s: %d cases\n", file, n)
	}
}

func rfc3339(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := t.UTC().Format(time.RFC3339)
	return &s
}

func pick[T any](rng *rand.Rand, xs ...T) T {
	return xs[rng.Intn(len(xs))]
}
