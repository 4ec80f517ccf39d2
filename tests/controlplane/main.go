// Command controlplane is a multi-call binary holding the real Kubernetes
// control-plane components that Flotilla's tests and local quickstart run on
// loopback: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
// kubelet and kubectl. The scheduler and kubelet run only where a test or the
// quickstart starts a node (containerd and runc on the host); control planes
// without nodes need neither.
//
// Each component runs in its own process (the first argument picks it) because
// the upstream commands keep process-global state: a signal handler that may be
// installed only once, feature-gate and metrics registries, and klog flags.
//
// When FLOTILLA_EXIT_ON_STDIN_EOF=1 the process exits as soon as its standard
// input reaches end-of-file. The test harness holds the write end of that pipe,
// so the components die with the harness however it ends (panic, SIGKILL), and
// nothing is left listening.
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	_ "time/tzdata"

	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
)

func main() {
	name := filepath.Base(os.Args[0])
	args := os.Args[1:]
	if name == "controlplane" || name == "flotilla-controlplane" {
		if len(args) == 0 {
			usage()
			os.Exit(2)
		}
		name, args = args[0], args[1:]
	}
	if os.Getenv("FLOTILLA_EXIT_ON_STDIN_EOF") == "1" {
		go exitOnStdinEOF()
	}
	var code int
	switch name {
	case "etcd":
		code = runEtcd(args)
	case "kube-apiserver":
		code = runAPIServer(args)
	case "kube-controller-manager":
		code = runControllerManager(args)
	case "kube-scheduler":
		code = runScheduler(args)
	case "kubelet":
		code = runKubelet(args)
	case "kubectl":
		code = runKubectl(args)
	default:
		usage()
		code = 2
	}
	os.Exit(code)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: controlplane etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kubectl [flags]")
}

// exitOnStdinEOF blocks until standard input is closed, then ends the process.
func exitOnStdinEOF() {
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}
