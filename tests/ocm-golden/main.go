// Command ocm-golden writes Flotilla's golden fixtures by running OCM's own
// code on generated inputs. It is built inside an OCM checkout (see README.md);
// none of OCM's code is copied here, only called.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

// now is the fixed instant every generated case is evaluated at.
var now = time.Date(2026, time.January, 15, 12, 0, 0, 0, time.UTC)

type fixtureFile struct {
	Generator string      `json:"generator"`
	OcmCommit string      `json:"ocmCommit"`
	Seed      int64       `json:"seed"`
	Cases     interface{} `json:"cases"`
}

// writeFixture writes one JSON document with one case per line: compact, yet a
// regenerated file diffs case by case.
func writeFixture[T any](dir, name, commit string, seed int64, cases []T) error {
	var buf bytes.Buffer
	head, err := json.Marshal(fixtureFile{
		Generator: "tests/ocm-golden (see its README)",
		OcmCommit: commit,
		Seed:      seed,
	})
	if err != nil {
		return err
	}
	// head ends with `"cases":null}`; the cases replace the null.
	head = bytes.TrimSuffix(head, []byte("null}"))
	buf.Write(head)
	buf.WriteString("[\n")
	for i, c := range cases {
		var line bytes.Buffer
		enc := json.NewEncoder(&line)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(c); err != nil {
			return err
		}
		buf.Write(bytes.TrimSuffix(line.Bytes(), []byte("\n")))
		if i+1 < len(cases) {
			buf.WriteString(",")
		}
		buf.WriteString("\n")
	}
	buf.WriteString("]}\n")
	var check interface{}
	if err := json.Unmarshal(buf.Bytes(), &check); err != nil {
		return fmt.Errorf("%s is not valid JSON: %w", name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644)
}

func main() {
	out := flag.String("out", "golden-out", "directory the JSON fixtures are written to")
	seed := flag.Int64("seed", 20261123, "seed of math/rand for the generated inputs")
	commit := flag.String("ocm-commit", "", "OCM commit the checkout is at (recorded in the fixtures)")
	only := flag.String("only", "rollout,placement,spechash", "comma-separated fixtures to write")
	flag.Parse()
	// OCM logs every scheduling step; the fixtures are the output that matters.
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	if *commit == "" {
		fmt.Fprintln(os.Stderr, "-ocm-commit is required")
		os.Exit(2)
	}
	for _, what := range strings.Split(*only, ",") {
		// Each fixture has its own generator seeded from the same seed so that
		// regenerating one does not change the others.
		rng := rand.New(rand.NewSource(*seed))
		var n int
		var err error
		var file string
		switch what {
		case "rollout":
			c := rolloutCases(rng)
			n, file = len(c), "rollout.json"
			err = writeFixture(*out, file, *commit, *seed, c)
		case "placement":
			var c []placementCase
			if c, err = placementCases(rng); err == nil {
				n, file = len(c), "placement.json"
				err = writeFixture(*out, file, *commit, *seed, c)
			}
		case "spechash":
			var c []specHashCase
			if c, err = specHashCases(rng); err == nil {
				n, file = len(c), "spec-hash.json"
				err = writeFixture(*out, file, *commit, *seed, c)
			}
		default:
			err = fmt.Errorf("unknown fixture %q", what)
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
