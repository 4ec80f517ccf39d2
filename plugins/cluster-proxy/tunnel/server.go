package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"syscall"
	"time"

	"github.com/rancher/remotedialer"
)

// apiserverAddress is the only address the hub ever asks an agent to dial; the agent maps it
// to its own kube-apiserver.
const apiserverAddress = "kube-apiserver:443"

// dialTimeout bounds how long a CONNECT waits for the agent to take the connection.
const dialTimeout = 10 * time.Second

// connectPath is where agents open their websocket.
const connectPath = "/connect"

func runServer(args []string) error {
	fs := flag.NewFlagSet("server", flag.ExitOnError)
	listen := fs.String("agent-listen", ":8091", "address agents connect to (TLS)")
	certFile := fs.String("tls-cert", "", "the server's certificate (PEM)")
	keyFile := fs.String("tls-key", "", "the server's private key (PEM)")
	caFile := fs.String("agent-ca", "", "CA bundle that signs agent credentials (the hub's client CA)")
	addon := fs.String("addon-name", "cluster-proxy", "the add-on whose agent credentials are accepted")
	socket := fs.String("proxy-socket", "", "unix socket the hub opens tunnels through")
	wait := fs.Duration("credentials-wait", 0, "how long to wait for the certificate, key and CA files to appear (another container writes them)")
	_ = fs.Parse(args)
	if *certFile == "" || *keyFile == "" || *caFile == "" || *socket == "" {
		return errors.New("--tls-cert, --tls-key, --agent-ca and --proxy-socket are required")
	}
	if err := awaitFiles(*wait, *certFile, *keyFile, *caFile); err != nil {
		return err
	}

	pem, err := os.ReadFile(*caFile)
	if err != nil {
		return fmt.Errorf("read agent CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("agent CA %s holds no certificate", *caFile)
	}
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		return fmt.Errorf("load serving certificate: %w", err)
	}

	tunnels := remotedialer.New(authorizer(*addon), remotedialer.DefaultErrorWriter)
	mux := http.NewServeMux()
	mux.Handle(connectPath, tunnels)

	agents := &http.Server{
		Addr:    *listen,
		Handler: mux,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    pool,
			MinVersion:   tls.VersionTLS12,
		},
		ReadHeaderTimeout: 10 * time.Second,
	}
	listener, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen for agents: %w", err)
	}

	_ = os.Remove(*socket)
	hubSide, err := net.Listen("unix", *socket)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *socket, err)
	}
	if err := os.Chmod(*socket, 0o600); err != nil {
		return fmt.Errorf("restrict %s: %w", *socket, err)
	}
	hub := &http.Server{Handler: hubHandler(tunnels), ReadHeaderTimeout: 10 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	errs := make(chan error, 2)
	go func() { errs <- agents.ServeTLS(listener, "", "") }()
	go func() { errs <- hub.Serve(hubSide) }()
	log.Printf("serving agents on %s, the hub on %s", listener.Addr(), *socket)
	select {
	case <-ctx.Done():
		_ = agents.Close()
		_ = hub.Close()
		return nil
	case err := <-errs:
		return err
	}
}

// awaitFiles waits up to wait for every file to exist.
func awaitFiles(wait time.Duration, files ...string) error {
	deadline := time.Now().Add(wait)
	for _, file := range files {
		for {
			_, err := os.Stat(file)
			if err == nil {
				break
			}
			if !errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
				return fmt.Errorf("credential file %s: %w", file, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

// authorizer keys each tunnel by the cluster its verified client certificate names.
func authorizer(addon string) remotedialer.Authorizer {
	return func(req *http.Request) (string, bool, error) {
		if req.TLS == nil || len(req.TLS.VerifiedChains) == 0 {
			return "", false, nil
		}
		cluster, err := clusterOf(req.TLS.VerifiedChains[0][0], addon)
		if err != nil {
			log.Printf("refused an agent: %v", err)
			return "", false, nil
		}
		log.Printf("agent of cluster %s connected", cluster)
		return cluster, true, nil
	}
}

// hubHandler serves the hub: CONNECT <cluster>:443 opens a connection to that cluster's
// kube-apiserver through its tunnel; GET /clusters lists the connected clusters.
func hubHandler(tunnels *remotedialer.Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/clusters" {
			clusters := tunnels.ListClients()
			sort.Strings(clusters)
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string][]string{"clusters": clusters})
			return
		}
		if r.Method != http.MethodConnect {
			http.Error(w, "only CONNECT <cluster>:443 and GET /clusters are served", http.StatusMethodNotAllowed)
			return
		}
		cluster, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			cluster = r.Host
		}
		if !tunnels.HasSession(cluster) {
			http.Error(w, fmt.Sprintf("cluster %q has no connected cluster-proxy agent", cluster), http.StatusServiceUnavailable)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), dialTimeout)
		upstream, err := tunnels.Dialer(cluster)(ctx, "tcp", apiserverAddress)
		cancel()
		if err != nil {
			http.Error(w, fmt.Sprintf("dial cluster %q through its tunnel: %v", cluster, err), http.StatusBadGateway)
			return
		}
		hijacker, ok := w.(http.Hijacker)
		if !ok {
			_ = upstream.Close()
			http.Error(w, "connection cannot be taken over", http.StatusInternalServerError)
			return
		}
		client, buffered, err := hijacker.Hijack()
		if err != nil {
			_ = upstream.Close()
			return
		}
		_, _ = client.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
		splice(client, buffered, upstream)
	})
}

// splice copies both ways until either side ends, then closes both.
func splice(client net.Conn, buffered *bufio.ReadWriter, upstream net.Conn) {
	done := make(chan struct{}, 2)
	go func() {
		// Bytes the client sent after its CONNECT may already sit in the reader.
		_, _ = io.Copy(upstream, buffered.Reader)
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(client, upstream)
		done <- struct{}{}
	}()
	<-done
	_ = client.Close()
	_ = upstream.Close()
	<-done
}
