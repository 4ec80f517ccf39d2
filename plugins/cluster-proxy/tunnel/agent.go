package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
	"github.com/rancher/remotedialer"
)

func runAgent(args []string) error {
	fs := flag.NewFlagSet("agent", flag.ExitOnError)
	hubURL := fs.String("hub-url", "", "the tunnel server's agent URL, wss://host:port/connect")
	caFile := fs.String("hub-ca", "", "CA bundle that signs the tunnel server's certificate")
	certFile := fs.String("cert", "", "the agent's client certificate (the add-on credential, tls.crt)")
	keyFile := fs.String("key", "", "the agent's private key (tls.key)")
	target := fs.String("target", "", "this cluster's kube-apiserver, host:port (default: the in-cluster service)")
	serverName := fs.String("hub-server-name", "", "the name the tunnel server's certificate is verified for (default: the URL's host)")
	_ = fs.Parse(args)
	if *hubURL == "" || *caFile == "" || *certFile == "" || *keyFile == "" {
		return errors.New("--hub-url, --hub-ca, --cert and --key are required")
	}
	if *target == "" {
		host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
		if host == "" || port == "" {
			return errors.New("--target is required outside a pod")
		}
		*target = net.JoinHostPort(host, port)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	// Only the kube-apiserver, whatever the other end asks for.
	allow := func(proto, address string) bool {
		return proto == "tcp" && address == apiserverAddress
	}
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", *target)
	}
	for {
		// The klusterlet rotates the credential in place: every attempt reads the files anew.
		dialer, err := websocketDialer(*caFile, *certFile, *keyFile, *serverName)
		if err != nil {
			log.Printf("load credentials: %v", err)
		} else {
			err = remotedialer.ConnectToProxyWithDialer(ctx, *hubURL, nil, allow, dialer, dial, nil)
			log.Printf("tunnel to %s ended: %v", *hubURL, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
	}
}

func websocketDialer(caFile, certFile, keyFile, serverName string) (*websocket.Dialer, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read hub CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("hub CA %s holds no certificate", caFile)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load client certificate: %w", err)
	}
	return &websocket.Dialer{
		HandshakeTimeout: 10 * time.Second,
		TLSClientConfig: &tls.Config{
			RootCAs:      pool,
			Certificates: []tls.Certificate{cert},
			ServerName:   serverName,
			MinVersion:   tls.VersionTLS12,
		},
	}, nil
}
