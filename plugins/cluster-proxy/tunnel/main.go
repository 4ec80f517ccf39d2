// Command flotilla-tunnel is the cluster-proxy add-on's reverse tunnel: an agent on each
// managed cluster dials out to a server beside the hub, and the hub then reaches the
// cluster's kube-apiserver through that connection, even when it has no route to it.
//
// The tunnel itself is Rancher's remotedialer (github.com/rancher/remotedialer), the
// websocket tunnel Rancher's cluster agents use in production. OCM's cluster-proxy uses
// konnectivity, whose server and agent are not published as Go modules; remotedialer is, and
// this binary only adds what Flotilla needs around it: who may connect, and what may be
// dialled.
//
//	flotilla-tunnel server  agents connect over mutual TLS; the hub connects over a unix socket
//	flotilla-tunnel agent   runs on a managed cluster and dials its kube-apiserver for the hub
//
// Trust boundaries:
//   - An agent is known only by its verified client certificate: the add-on credential the
//     hub issued to that cluster's agent. The cluster it serves is read from the certificate,
//     never from anything the agent says, so no cluster can take another's tunnel.
//   - The agent dials exactly one address, its kube-apiserver, whatever the hub asks for: a
//     tunnel is not a way into the managed cluster's network.
//   - The hub side is a unix socket, reachable only by processes that may open the file.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	// The test harness and `flotilla up` hold this pipe's other end: the tunnel ends with them.
	if os.Getenv("FLOTILLA_EXIT_ON_STDIN_EOF") == "1" {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			os.Exit(0)
		}()
	}
	var err error
	switch os.Args[1] {
	case "server":
		err = runServer(os.Args[2:])
	case "agent":
		err = runAgent(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "flotilla-tunnel %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: flotilla-tunnel server|agent [flags]")
	os.Exit(2)
}
