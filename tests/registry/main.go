// Command registry is the CNCF distribution registry (github.com/distribution/distribution/v3,
// the code of its cmd/registry) with only what Flotilla's tests need linked in: filesystem
// storage and htpasswd authentication. flotilla-testing builds it on first use and starts it on
// a free loopback port to test pulling plugins from a real OCI registry.
//
// When FLOTILLA_EXIT_ON_STDIN_EOF=1 the process exits as soon as its standard input reaches
// end-of-file. The test harness holds the write end of that pipe, so the registry dies with the
// harness however it ends (panic, SIGKILL), and nothing is left listening.
package main

import (
	"io"
	"os"

	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
)

func main() {
	if os.Getenv("FLOTILLA_EXIT_ON_STDIN_EOF") == "1" {
		go exitOnStdinEOF()
	}
	// `registry serve <config.yml>`; Execute exits non-zero itself when serving fails.
	if err := registry.RootCmd.Execute(); err != nil {
		os.Exit(1)
	}
}

// exitOnStdinEOF blocks until standard input is closed, then ends the process.
func exitOnStdinEOF() {
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}
