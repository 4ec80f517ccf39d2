package main

import (
	"crypto/x509"
	"fmt"
	"regexp"
	"strings"
)

// clusterPrefix starts the common name of every add-on agent credential the hub issues:
// system:open-cluster-management:cluster:<cluster>:addon:<addon>:agent:<agent>.
const clusterPrefix = "system:open-cluster-management:cluster:"

// dns1123Label is a Kubernetes namespace name, which a managed cluster's name must also be.
var dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// clusterOf returns the managed cluster a verified agent certificate speaks for, refusing
// any certificate that is not an agent credential of add-on `addon`. The subject's
// organisations must hold the add-on's group for that same cluster, as the hub's CSR
// approval requires, so a certificate whose name and groups disagree is refused.
func clusterOf(cert *x509.Certificate, addon string) (string, error) {
	cn := cert.Subject.CommonName
	rest, ok := strings.CutPrefix(cn, clusterPrefix)
	if !ok {
		return "", fmt.Errorf("certificate %q is not an add-on agent credential", cn)
	}
	cluster, rest, ok := strings.Cut(rest, ":addon:")
	if !ok || !dns1123Label.MatchString(cluster) || len(cluster) > 63 {
		return "", fmt.Errorf("certificate %q names no valid cluster", cn)
	}
	name, agent, ok := strings.Cut(rest, ":agent:")
	if !ok || name != addon || agent == "" {
		return "", fmt.Errorf("certificate %q is not an agent credential of add-on %q", cn, addon)
	}
	group := clusterPrefix + cluster + ":addon:" + addon
	for _, org := range cert.Subject.Organization {
		if org == group {
			return cluster, nil
		}
	}
	return "", fmt.Errorf("certificate %q lacks group %q", cn, group)
}
