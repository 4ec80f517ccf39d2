// Command csr-oracle answers how Go's standard library reads certificate requests and
// certificates, for the differential test of Flotilla's reader (tests/tests/csr_oracle.rs).
//
// It reads a JSON list on stdin and writes a JSON list of answers, one per item, in order:
//
//	{"csr": "<base64 of the input bytes>"}   read as Kubernetes' ParseCSR does: the first PEM
//	                                          block, which must be a CERTIFICATE REQUEST, then
//	                                          x509.ParseCertificateRequest and CheckSignature
//	{"cert": "<base64 of PEM or DER>"}       the first PEM block (or the bytes as DER), then
//	                                          x509.ParseCertificate
//	{"make": {"cn": .., "o": [..], "ou": [..], "dns": [..], "key": ".."}}
//	                                          a request as OCM's Go agents make one: an ECDSA
//	                                          P-256 key (or "key": p384, p521, rsa2048, rsapss,
//	                                          ed25519) and x509.CreateCertificateRequest
//
// Standard library only, so it builds offline.
package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
)

type subject struct {
	CN  string   `json:"cn"`
	O   []string `json:"o"`
	OU  []string `json:"ou"`
	DNS []string `json:"dns"`
	Key string   `json:"key"`
}

type item struct {
	CSR  []byte   `json:"csr,omitempty"`
	Cert []byte   `json:"cert,omitempty"`
	Make *subject `json:"make,omitempty"`
}

type answer struct {
	Parsed         bool     `json:"parsed"`
	Error          string   `json:"error,omitempty"`
	SignatureOK    bool     `json:"signature_ok"`
	SignatureError string   `json:"signature_error,omitempty"`
	CN             string   `json:"cn"`
	O              []string `json:"o"`
	OU             []string `json:"ou"`
	DNS            []string `json:"dns"`
	PEM            string   `json:"pem,omitempty"`
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func readCSR(data []byte) answer {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return answer{Error: "PEM block type must be CERTIFICATE REQUEST", O: []string{}, OU: []string{}, DNS: []string{}}
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return answer{Error: err.Error(), O: []string{}, OU: []string{}, DNS: []string{}}
	}
	a := answer{
		Parsed: true,
		CN:     csr.Subject.CommonName,
		O:      nonNil(csr.Subject.Organization),
		OU:     nonNil(csr.Subject.OrganizationalUnit),
		DNS:    nonNil(csr.DNSNames),
	}
	if err := csr.CheckSignature(); err != nil {
		a.SignatureError = err.Error()
	} else {
		a.SignatureOK = true
	}
	return a
}

func readCert(data []byte) answer {
	der := data
	if block, _ := pem.Decode(data); block != nil {
		der = block.Bytes
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return answer{Error: err.Error(), O: []string{}, OU: []string{}, DNS: []string{}}
	}
	return answer{
		Parsed: true,
		CN:     cert.Subject.CommonName,
		O:      nonNil(cert.Subject.Organization),
		OU:     nonNil(cert.Subject.OrganizationalUnit),
		DNS:    nonNil(cert.DNSNames),
	}
}

func makeCSR(s *subject) (answer, error) {
	template := &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: s.CN, Organization: s.O, OrganizationalUnit: s.OU},
		DNSNames: s.DNS,
	}
	var key crypto.Signer
	var err error
	switch s.Key {
	case "", "p256":
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "p384":
		key, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "p521":
		key, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case "rsa2048":
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	case "rsapss":
		key, err = rsa.GenerateKey(rand.Reader, 2048)
		template.SignatureAlgorithm = x509.SHA256WithRSAPSS
	case "ed25519":
		_, key, err = ed25519.GenerateKey(rand.Reader)
	default:
		err = fmt.Errorf("unknown key type %q", s.Key)
	}
	if err != nil {
		return answer{}, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, template, key)
	if err != nil {
		return answer{}, err
	}
	return answer{Parsed: true, PEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})), O: []string{}, OU: []string{}, DNS: []string{}}, nil
}

func main() {
	var items []item
	if err := json.NewDecoder(os.Stdin).Decode(&items); err != nil {
		fmt.Fprintf(os.Stderr, "csr-oracle: read stdin: %v\n", err)
		os.Exit(2)
	}
	answers := make([]answer, 0, len(items))
	for i, it := range items {
		switch {
		case it.Make != nil:
			a, err := makeCSR(it.Make)
			if err != nil {
				fmt.Fprintf(os.Stderr, "csr-oracle: item %d: make: %v\n", i, err)
				os.Exit(1)
			}
			answers = append(answers, a)
		case it.Cert != nil:
			answers = append(answers, readCert(it.Cert))
		default:
			answers = append(answers, readCSR(it.CSR))
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(answers); err != nil {
		fmt.Fprintf(os.Stderr, "csr-oracle: write stdout: %v\n", err)
		os.Exit(1)
	}
}
